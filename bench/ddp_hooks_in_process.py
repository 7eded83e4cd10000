"""The watch's hooks on two DDP ranks, without the noise of launches: each rank pinned to its own core steps the
DDP example's model (examples/ddp_train.py's, batch 64) in alternating rounds, plain and under the instruments
(reporting nowhere), a new DDP module each round so the instruments see it made. Run by bench/watch_bench.py
(``python -m torch.distributed.run --nproc-per-node 2 bench/ddp_hooks_in_process.py ROUNDS STEPS``); rank 0
prints each arm's median step in ms and each round's."""
from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.watch.instruments import Instruments  # noqa: E402


def step_ms(inputs, targets, steps: int) -> float:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 2))
    ddp = DistributedDataParallel(model)
    optimizer, loss_fn = torch.optim.SGD(ddp.parameters(), lr=0.01), nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad()
        loss_fn(ddp(inputs), targets).backward()
        optimizer.step()
    for _ in range(5):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps * 1e3


def main() -> None:
    rounds, steps = int(sys.argv[1]), int(sys.argv[2])
    os.sched_setaffinity(0, {int(os.environ["LOCAL_RANK"]) % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    inputs, targets = torch.randn(64, 256), torch.randint(0, 2, (64,))
    each: dict[str, list[float]] = {"plain": [], "hooked": []}
    for _ in range(rounds):
        each["plain"].append(step_ms(inputs, targets, steps))
        instruments = Instruments("cpu:0", lambda report: None, count_flops=False)
        instruments.install()
        try:
            each["hooked"].append(step_ms(inputs, targets, steps))
        finally:
            instruments.uninstall()
    if dist.get_rank() == 0:
        print(json.dumps({"medians": {arm: statistics.median(v) for arm, v in each.items()}, "each": each}))
    # The rounds' DDP modules (their reducers hold the process group) freed while the interpreter is whole, as
    # examples/ddp_train.py does: a gloo thread freeing a finished all-reduce at exit aborts the process (one run
    # of this bench ended so, rank 1 SIGABRT)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
