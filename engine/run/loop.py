"""The one training loop every strategy runs in, on every rank.

The executor owns the forward, backward and optimizer step; the loop owns the
batches (``engine.run.feed``) and the timing, and reports each step to the worker.
Stop requests are the worker's: it ends the rank processes between or during steps.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import nullcontext

from engine.devices import Device
from engine.measure.counted_step import counted_step
from engine.measure.flops import DeviceFlops
from engine.measure.profiling import StepProfiler, first_profiled, profiled_steps
from engine.measure.tensor_memory import TensorMeter
from engine.precision import autocast
from engine.run.feed import BatchFeed
from engine.strategies.base import Executor, RankContext
from engine.wire.rank import Profiled, RankEvent, StepReport


def train(ctx: RankContext, executor: Executor, emit: Callable[[RankEvent], None],
          data_device: Device | None = None, loader_cores: list[int] = (), flops: DeviceFlops | None = None) -> None:
    """Run the steps. ``data_device``: the device this process's wait for its batch idles, timed there as
    "data" (engine.run.feed); ``loader_cores``: where a DataLoader's workers run (--input-prep loader);
    ``flops``: counts the FLOPs of step ``counted_step`` by device (engine.measure.flops)."""
    timer = ctx.timer
    # The peak tracker (fsdp's) on the last warm-up step, its per-op cost out of the measured steps; not on the
    # first step, whose peak is the optimizer's state being made, not that of the steps after it.
    peak_step = ctx.config.warmup - 1 if ctx.config.warmup >= 2 else None
    meter = TensorMeter(executor.placements(), step_peak=executor.step_peak, peak_step=peak_step)
    profiler = StepProfiler(ctx.config.profile_steps, first_profiled(ctx.config),
                            any(d.kind == "cuda" for d in ctx.devices), ctx.rank)
    reported = None
    device_types = sorted({d.kind for d in ctx.devices})
    counted_at = counted_step(ctx.config.steps, profiled_steps(ctx.config))
    feed = BatchFeed(ctx, executor, data_device, loader_cores)   # last: a loader's workers start here
    try:
        for step in range(ctx.config.steps):
            timer.begin_step()
            meter.before_step()
            start = time.perf_counter()
            profiler.before_step(step, start)
            inputs, targets = feed.next()
            counted = flops is not None and step == counted_at
            with autocast(ctx.config, device_types), meter.step_context((inputs, targets)), \
                    (flops.counting() if counted else nullcontext()):
                result = executor.step(inputs, targets)
            intervals = timer.end_step()
            communication = ctx.comm.take()
            end = time.perf_counter()
            memory = meter.after_step()
            # Sent when it changes (it rarely does after the first steps): events stay small at 1,000s of steps/s.
            emit(StepReport(step, start, end, intervals, result.loss_part, result.samples, result.batch_split,
                            tensor_memory=memory if memory != reported else None,
                            communication=communication or None,
                            flops=dict(flops.by_device) if counted else None))
            reported = memory
            if counted and flops.uncounted:
                print(f"FLOPs not counted (as 0) for {', '.join(flops.uncounted)}: "
                      f"{'; '.join(flops.uncounted.values())}", file=sys.stderr, flush=True)
            trace = profiler.after_step(step)
            if trace is not None:
                emit(Profiled(trace, profiler.started_at))
    finally:
        feed.close()
        meter.close()
        profiler.close()
