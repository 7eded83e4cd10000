"""Tensor-parallel training (``parallelize_module``, Megatron-style), as one writes it for torchrun:

    torchrun --nproc-per-node 2 examples/tp_train.py --steps 20

Every rank holds a slice of every layer: each block's first linear layer is split by its outputs
(``ColwiseParallel``), its second by its inputs (``RowwiseParallel``), so a block needs one all-reduce of
its output in the forward and one of its input's gradient in the backward. All ranks see the same batch.
Nothing of Splitscope's in it; ``python main.py watch --devices cpu:2 -- examples/tp_train.py`` runs it
unmodified and shows those all-reduces (DTensor's functional collectives) as each device's communication.
"""
import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: rank k on cuda:k, NCCL")
    args = parser.parse_args()

    cuda = args.device == "cuda"
    device_type = "cuda" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh(device_type, (int(os.environ["WORLD_SIZE"]),))
    rank = dist.get_rank()
    torch.manual_seed(0)   # every rank builds the same model, then keeps its slices
    model = nn.Sequential(*(Block(args.width) for _ in range(args.depth)), nn.Linear(args.width, 10)).to(device_type)
    for block in model[:-1]:
        parallelize_module(block, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1)   # the same samples on every rank
    loss, timed_from, timed = None, None, 0
    for step in range(args.steps):
        if step == min(2, args.steps - 1):   # the steps after the first two: caches warm
            timed_from = time.perf_counter()
        inputs = torch.randn(args.batch_size, args.width, generator=data).to(device_type)
        targets = torch.randint(0, 10, (args.batch_size,), generator=data).to(device_type)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        timed += timed_from is not None
    if rank == 0 and loss is not None:
        print(f"final loss {loss.item():.9f} (pid {os.getpid()}); "
              f"{1e3 * (time.perf_counter() - timed_from) / timed:.2f} ms per step")
    # Before the group goes, while Python is fully alive: free what the last steps' collectives still hold, and
    # wait for every rank. Without it, 1 to 3 in 10 runs on gloo ended a rank in std::terminate ("terminate
    # called without an active exception", SIGABRT) as the interpreter shut down.
    del model, optimizer, loss
    gc.collect()
    if cuda:   # NCCL's barrier on this rank's GPU
        dist.barrier(device_ids=[int(os.environ["LOCAL_RANK"])])
    else:
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
