"""An example model file (``--model-file examples/heavy_later_blocks.py``): later blocks are heavier.

Six blocks costing about 1, 1, 1, 1, 2, 2 (one or two 512x512 linear layers each):
the balanced two-stage split is 4 (4 | 4), not the middle one, 3 (3 | 5). The
split-point experiment's test and benchmark use it; it also shows the shape of a
model file: ``build_model()`` returns an ``nn.Sequential`` whose children are the
blocks a split can fall between, ``make_batch(batch_size, generator)`` returns
``(inputs, targets)``.
"""
import torch
from torch import nn

WIDTH = 512


def _light() -> nn.Module:
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU())


def _heavy() -> nn.Module:
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU())


def build_model() -> nn.Sequential:
    return nn.Sequential(_light(), _light(), _light(), _light(), _heavy(), _heavy())


def make_batch(batch_size: int, generator: torch.Generator):
    return (torch.randn(batch_size, WIDTH, generator=generator),
            torch.randn(batch_size, WIDTH, generator=generator))
