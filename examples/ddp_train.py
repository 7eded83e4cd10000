"""Data-parallel training with a DataLoader, as one writes it for torchrun:

    torchrun --nproc-per-node 2 examples/ddp_train.py --steps 20 --decode-ms 0.5 --workers 2
    torchrun --nproc-per-node 2 examples/ddp_train.py --device cuda     # rank k on cuda:k

Nothing of Splitscope's in it; ``python main.py watch --devices cpu:2 -- examples/ddp_train.py ...``
runs it unmodified and shows each device's time by kind. ``--decode-ms`` is the CPU time each sample
costs the loader (an image decode stands in for it), ``--workers`` the DataLoader's worker processes.
"""
import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class SyntheticImages(Dataset):
    """Samples made from their index, so every run sees the same data; ``decode_ms`` of CPU work each."""

    def __init__(self, size: int, features: int, decode_ms: float):
        self.size, self.features, self.decode_ms = size, features, decode_ms

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        until = time.perf_counter() + self.decode_ms / 1e3
        while time.perf_counter() < until:   # decoding: work, not sleep
            pass
        g = torch.Generator().manual_seed(index)
        x = torch.randn(self.features, generator=g)
        return x, (x.sum() > 0).long()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--decode-ms", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: rank k on cuda:k, NCCL")
    args = parser.parse_args()

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.features, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 2)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    data = SyntheticImages(args.steps * args.batch_size * dist.get_world_size(), args.features, args.decode_ms)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers, pin_memory=cuda,
                        sampler=DistributedSampler(data, shuffle=False))
    loss, timed_from, timed = None, None, 0
    for step, (inputs, targets) in enumerate(loader):
        if step == args.steps:
            break
        if step == min(2, args.steps - 1):   # the steps after the first two: caches warm, loader running
            timed_from = time.perf_counter()
        inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = loss_fn(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        timed += timed_from is not None
    if rank == 0 and loss is not None:
        print(f"final loss {loss.item():.9f} (pid {os.getpid()}); "
              f"{1e3 * (time.perf_counter() - timed_from) / timed:.2f} ms per step")
    # DDP's reducer holds the process group, and gloo's threads end only with it: released here, while the
    # interpreter is whole (at exit, a thread still freeing a finished all-reduce aborts the process)
    del ddp, optimizer, loss
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
