"""pipeline: the naive split with the batch cut into micro-batches that flow through the stages together.

On CPU virtual devices and on distinct GPUs each stage is a process and
torch.distributed.pipelining runs the GPipe or 1F1B schedule. With a GPU shared
by stages, or CPU and GPU mixed, the stages share one process and run the
tutorial's split-size loop (GPipe order).
"""
from __future__ import annotations

from engine.problems import Problem
from engine.strategies import staged


def world_size(config, devices) -> int:
    return len(devices) if staged.distinct_processes(devices) else 1


def check(config, devices, n_blocks) -> list[Problem]:
    found = staged.check_stages(config, devices, n_blocks)
    m, p = config.effective_micro_batches, len(devices)
    if config.schedule == "1f1b" and m < p:
        found.append(Problem("micro_batches", f"the 1f1b schedule needs at least as many micro-batches as stages "
                                              f"({p}), got {m}"))
    if config.schedule == "1f1b" and not staged.distinct_processes(devices):
        found.append(Problem("schedule", "1f1b needs one process per stage (CPU virtual devices or distinct "
                                         "GPUs); with shared or mixed devices use gpipe"))
    return found


def build(ctx):
    m = ctx.config.effective_micro_batches
    if ctx.world_size > 1:
        from engine.strategies.scheduled_stages import ScheduledStages
        return ScheduledStages(ctx, micro_batches=m, schedule=ctx.config.schedule)
    from engine.strategies.in_process_stages import InProcessStages
    return InProcessStages(ctx, micro_batches=m)
