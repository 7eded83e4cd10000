"""Fully sharded data-parallel training (FSDP2, ``fully_shard``), as one writes it for torchrun:

    torchrun --nproc-per-node 2 examples/fsdp_train.py --steps 20

Each rank keeps a shard of every layer's parameters, gathers a layer's whole parameters just before
its forward and backward, and reduce-scatters its gradients after. Nothing of Splitscope's in it;
``python main.py watch --devices cpu:2 -- examples/fsdp_train.py`` runs it unmodified and shows the
all-gathers and reduce-scatters as each device's communication.
"""
import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: rank k on cuda:k, NCCL")
    args = parser.parse_args()

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU()) for _ in range(args.depth)),
                          nn.Linear(args.width, 10)).to(device)
    for block in model[:-1]:   # one all-gather per block, so the next block's can overlap this one's compute
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1 + rank)   # each rank its own samples
    loss, timed_from, timed = None, None, 0
    for step in range(args.steps):
        if step == min(2, args.steps - 1):   # the steps after the first two: caches warm
            timed_from = time.perf_counter()
        inputs = torch.randn(args.batch_size, args.width, generator=data).to(device)
        targets = torch.randint(0, 10, (args.batch_size,), generator=data).to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        timed += timed_from is not None
    if loss is not None:
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"final loss {mean.item() / world:.9f} (pid {os.getpid()}); "
                  f"{1e3 * (time.perf_counter() - timed_from) / timed:.2f} ms per step")
    # Before the group goes, while Python is fully alive: free what the last steps' collectives still hold, and
    # wait for every rank. Without it, 1 to 3 in 10 runs on gloo ended a rank in std::terminate ("terminate
    # called without an active exception", SIGABRT) as the interpreter shut down.
    del model, optimizer, loss
    gc.collect()
    if cuda:   # NCCL's barrier on this rank's GPU
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
