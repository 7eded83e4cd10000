"""model-parallel: the naive split. Stage k's blocks on device k, one whole batch at a time."""
from __future__ import annotations

from engine.strategies import staged


def world_size(config, devices) -> int:
    # On GPUs the naive split keeps the tutorial's one-process shape.
    return len(devices) if staged.all_cpu(devices) else 1


def check(config, devices, n_blocks):
    return staged.check_stages(config, devices, n_blocks)


def build(ctx):
    if ctx.world_size > 1:
        from engine.strategies.scheduled_stages import ScheduledStages
        return ScheduledStages(ctx, micro_batches=1, schedule="gpipe")
    from engine.strategies.in_process_stages import InProcessStages
    return InProcessStages(ctx, micro_batches=1)
