"""A model file whose forward branches on a tensor's value: the tracer that cuts stages refuses it."""
import torch
from torch import nn


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 4)

    def forward(self, x):
        h = self.first(x)
        if h.sum() > 0:  # data-dependent control flow
            h = h * 2
        return self.second(h)


def build_model():
    return Gated()


def make_batch(batch_size, generator):
    return torch.randn(batch_size, 8, generator=generator), torch.randint(0, 4, (batch_size,), generator=generator)
