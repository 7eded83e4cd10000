"""Which step a rank's dispatch-mode meters count: its FLOPs (engine/measure/flops.py) and a pipeline's sends
and receives (engine/strategies/pipeline/scheduled_stages.py). Torch-free: the worker notes when it is a measured
one."""
from __future__ import annotations

# A warm-up step by default (a meter slows the step it watches), and not the first, in which torch's pipelining
# runs an extra forward and loss to infer its stages' shapes.
COUNTED_STEP = 1


def counted_step(steps: int, profiled: range = range(0)) -> int:
    """``steps`` 0: open-ended (a watched script's, engine/watch/instruments.py). ``profiled``: the steps
    torch.profiler records (engine/measure/profiling.py ``profiled_steps``): the counter's dispatch would be in
    their traces, so the step after them is counted where there is one."""
    step = min(COUNTED_STEP, steps - 1) if steps else COUNTED_STEP
    if step in profiled and (not steps or profiled.stop < steps):
        return profiled.stop
    return step


def counted_step_note(steps: int, warmup: int, profiled: range = range(0)) -> str | None:
    """What a reader must know when the counted step is among the measured ones (a warm-up of 1 or none), or
    among those torch.profiler recorded (no step after them)."""
    step = counted_step(steps, profiled)
    notes = []
    if step >= warmup:
        notes.append(f"step {step}'s FLOPs were counted (engine/measure/flops.py) while it was measured: its time "
                     f"includes the counter's (a few % of a step; see make bench), with --warmup {step + 1} or more "
                     "it would not")
    if step in profiled:
        notes.append(f"step {step}'s FLOPs were counted while torch.profiler recorded it (no step after the "
                     "profiled ones): its trace holds the counter's dispatch too")
    return "\n".join(notes) or None
