"""
Style: the guard at the top of some pytorch/examples distributed scripts (tensor/model
parallel examples) that give up politely when fewer than two GPUs are visible, followed by
a classic two-device model-parallel toy (first half of the net on cuda:0, second half on
cuda:1). Own code.

Tests: a script that exits with status 0 BEFORE any training step when
`torch.cuda.device_count() < 2`, printing
`Unable to locate sufficient 2 gpus to run this example. Exiting.` and nothing else.
With two or more GPUs it trains `--steps` steps and prints `final loss X`.
"""
import argparse
import sys

import torch
import torch.nn as nn

_min_gpu_count = 2

if torch.cuda.device_count() < _min_gpu_count:
    print(f"Unable to locate sufficient {_min_gpu_count} gpus to run this example. Exiting.")
    sys.exit(0)

parser = argparse.ArgumentParser(description='Two-GPU model-parallel toy')
parser.add_argument('--steps', type=int, default=5)
parser.add_argument('--batch-size', type=int, default=16)
args = parser.parse_args()


class ToyModelParallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(32, 64).to('cuda:0')
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(64, 4).to('cuda:1')

    def forward(self, x):
        x = self.relu(self.net1(x.to('cuda:0')))
        return self.net2(x.to('cuda:1'))


model = ToyModelParallel()
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    optimizer.zero_grad()
    outputs = model(torch.randn(args.batch_size, 32))
    labels = torch.randn(args.batch_size, 4).to('cuda:1')
    loss = loss_fn(outputs, labels)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
print(f"final loss {loss.item():.4f}")
