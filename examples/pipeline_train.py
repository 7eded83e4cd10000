"""A model split in two stages over two processes with torch.distributed.pipelining, as one writes it for
torchrun:

    torchrun --nproc-per-node 2 examples/pipeline_train.py --micro-batches 1    # the naive split
    torchrun --nproc-per-node 2 examples/pipeline_train.py --micro-batches 4    # GPipe

Nothing of Splitscope's in it; ``python main.py watch --devices cpu:2 -- examples/pipeline_train.py ...``
runs it unmodified. The model is Splitscope's mlp (``--width``, ``--depth``: Linear+ReLU blocks and a
head), cut after block ``--split``, so an engine run of the same model and split compares with it.
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe


def blocks(width: int, depth: int) -> list[nn.Module]:
    return [nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth)] + [nn.Linear(width, 10)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--split", type=int, default=2, help="the first block of the second stage")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--micro-batches", type=int, default=1)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, "two stages, two processes"
    torch.manual_seed(0)
    everything = blocks(args.width, args.depth)
    mine = nn.Sequential(*(everything[:args.split] if rank == 0 else everything[args.split:]))
    stage = PipelineStage(mine, rank, world, torch.device("cpu"))   # shapes inferred on the first step
    schedule = ScheduleGPipe(stage, n_microbatches=args.micro_batches, loss_fn=nn.CrossEntropyLoss(),
                             scale_grads=True)
    optimizer = torch.optim.SGD(mine.parameters(), lr=0.01)
    data = torch.Generator().manual_seed(1)
    timed_from = None
    for step in range(args.steps):
        if step == min(2, args.steps - 1):   # the steps after the first two: shapes inferred, caches warm
            timed_from = time.perf_counter()
        inputs = torch.randn(args.batch_size, args.width, generator=data)
        targets = torch.randint(0, 10, (args.batch_size,), generator=data)
        optimizer.zero_grad()
        if rank == 0:
            schedule.step(inputs)
        else:
            losses = []
            schedule.step(target=targets, losses=losses)
            if step == args.steps - 1:
                print(f"final loss {sum(x.item() for x in losses) / len(losses):.9f}")
        optimizer.step()
    if rank == world - 1:
        timed = args.steps - min(2, args.steps - 1)
        print(f"{1e3 * (time.perf_counter() - timed_from) / timed:.2f} ms per step")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
