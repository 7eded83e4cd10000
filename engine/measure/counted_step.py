"""Which step a rank's dispatch-mode meters count: its FLOPs (engine/measure/flops.py) and a pipeline's sends
and receives (engine/strategies/scheduled_stages.py). Torch-free: the worker notes when it is a measured one."""
from __future__ import annotations

# A warm-up step by default (a meter slows the step it watches), and not the first, in which torch's pipelining
# runs an extra forward and loss to infer its stages' shapes.
COUNTED_STEP = 1


def counted_step(steps: int) -> int:
    """``steps`` 0: open-ended (a watched script's, engine/watch/instruments.py)."""
    return min(COUNTED_STEP, steps - 1) if steps else COUNTED_STEP


def counted_step_note(steps: int, warmup: int) -> str | None:
    """What a reader must know when the counted step is among the measured ones (a warm-up of 1 or none)."""
    step = counted_step(steps)
    if step < warmup:
        return None
    return (f"step {step}'s FLOPs were counted (engine/measure/flops.py) while it was measured: its time includes "
            "the counter's (a few % of a step; see make bench), with --warmup 2 or more it would not")
