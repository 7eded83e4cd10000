"""A plain torch.distributed.pipelining script: what a user writes by hand, for the engine-overhead bench.

    python -m bench.plain_pipeline RANK WORLD STORE_FILE OUT_JSON WIDTH DEPTH BATCH MICRO_BATCHES STEPS SPLIT

Each rank pins itself to core RANK with one intra-op thread, builds the same
mlp the engine builds (same seed, so the same blocks), keeps its stage, prepares
its batches before the first step as the engine's default does, and runs
ScheduleGPipe. It records when each step ended (perf_counter, one clock for all
processes on Linux); the bench takes a step's time as the engine does, from the
previous step's last end to this step's last end.
"""
from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> None:
    rank, world, store_file, out = int(argv[0]), int(argv[1]), argv[2], argv[3]
    width, depth, batch, micro, steps, split = map(int, argv[4:10])
    os.sched_setaffinity(0, {rank % len(os.sched_getaffinity(0))})
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    from engine.config import ExperimentConfig
    from engine.models.build import build
    from engine.rules import effective_lr
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_file, world), rank=rank, world_size=world)
    config = ExperimentConfig(model="mlp", width=width, depth=depth, batch_size=batch, steps=steps)
    spec = build(config)
    bounds = [(0, split), (split, len(spec.blocks))][rank]
    module = spec.sequential(*bounds)
    stage = PipelineStage(module, rank, world, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=micro, loss_fn=spec.loss_fn, scale_grads=True)
    optimizer = torch.optim.SGD(module.parameters(), lr=effective_lr(config))
    batches = spec.data.batches(batch)
    pool = [next(batches) for _ in range(min(16, steps))]
    ends = []
    for step in range(steps):
        x, y = pool[step % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=y, losses=[])
        optimizer.step()
        ends.append(time.perf_counter())
    with open(out, "w") as f:
        json.dump(ends, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
