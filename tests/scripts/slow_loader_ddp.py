"""
Style: a plain torchrun DDP script (the pattern of the pytorch/examples and PyTorch DDP
tutorials: read RANK/LOCAL_RANK/WORLD_SIZE from the environment, init_process_group,
DistributedSampler, DDP-wrapped model, SGD). Own code; gloo backend, CPU.

Tests: input-pipeline stalls. The Dataset's __getitem__ sleeps `--slow-ms` milliseconds
on the first sample of every third batch a rank loads (local batches 2, 5, 8, ...),
with DataLoader(num_workers=0) so the stall lands in the training process between steps.
Runs under torchrun (one process group, gloo) and also as a single plain process (no
RANK in the environment: no process group at all). Prints `training steps N` and
`final loss X` (rank 0 only).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser(description='DDP with a data loader that stalls every third batch')
parser.add_argument('--steps', type=int, default=9, help='training steps (batches) per rank')
parser.add_argument('--batch-size', type=int, default=32)
parser.add_argument('--slow-ms', type=float, default=80.0, help='stall on every third batch, in ms')
parser.add_argument('--lr', type=float, default=0.05)
parser.add_argument('--features', type=int, default=32)
args = parser.parse_args()


class SlowEveryThirdBatch(Dataset):
    """Sample i of the global dataset goes to rank i % world (DistributedSampler, no shuffle),
    so its position in that rank's stream is i // world."""

    def __init__(self, length, features, batch_size, world_size, slow_ms):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(length, features, generator=g)
        self.y = (self.x[:, :4].sum(1, keepdim=True) > 0).float()
        self.batch_size, self.world_size, self.slow_ms = batch_size, world_size, slow_ms

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        local = index // self.world_size
        if (local // self.batch_size) % 3 == 2 and local % self.batch_size == 0:
            time.sleep(self.slow_ms / 1000.0)
        return self.x[index], self.y[index]


def main():
    distributed = int(os.environ.get('RANK', -1)) != -1
    if distributed:
        dist.init_process_group(backend='gloo')
        rank, world_size = dist.get_rank(), dist.get_world_size()
    else:
        rank, world_size = 0, 1
    torch.manual_seed(1234)

    dataset = SlowEveryThirdBatch(args.steps * args.batch_size * world_size, args.features,
                                  args.batch_size, world_size, args.slow_ms)
    sampler = DistributedSampler(dataset, shuffle=False) if distributed else None
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, shuffle=False, num_workers=0)

    model = nn.Sequential(nn.Linear(args.features, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    if distributed:
        model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.BCEWithLogitsLoss()

    steps = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        steps += 1
        if rank == 0:
            print(f'step {steps}: loss {loss.item():.4f}')
        if steps >= args.steps:
            break

    if rank == 0:
        print(f'training steps {steps}')
        print(f'final loss {loss.item():.4f}')
    if distributed:
        dist.destroy_process_group()


if __name__ == '__main__':
    main()
