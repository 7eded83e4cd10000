"""The ``telemetry`` section of a run's summary (design.md, "Worker protocol" JSON).

Only samples taken between the first and the last measured step count: before
the first step the worker is still starting (imports, model build), after the
last it is tearing down, and neither is the training being measured. Those
samples stay stored with the run; they just do not enter the means.
"""
from __future__ import annotations

from typing import Iterable

from engine.telemetry.sample import DeviceSample


def summarize(samples: Iterable[DeviceSample], device_names: list[str],
              t_first_step: float | None, t_last_step: float | None, rate_hz: float) -> dict:
    """``{"rate_hz", "util_mean", "samples", "samples_per_s"}`` for a run.

    ``util_mean[i]`` is the mean utilization (percent) of ``device_names[i]``
    over samples with ``t_first_step <= t <= t_last_step`` that have one, None
    if none do; ``samples_per_s[i]`` is that device's sample count in the window
    divided by the window's length (None for an empty window); ``samples`` counts
    every stored sample, inside the window or not. Times are perf_counter seconds.
    """
    samples = list(samples)
    index = {name: i for i, name in enumerate(device_names)}
    util_sum = [0.0] * len(device_names)
    util_count = [0] * len(device_names)
    in_window = [0] * len(device_names)
    has_window = t_first_step is not None and t_last_step is not None and t_last_step >= t_first_step
    if has_window:
        for sample in samples:
            i = index.get(sample.device)
            if i is None or not t_first_step <= sample.t <= t_last_step:
                continue
            in_window[i] += 1
            if sample.util is not None:
                util_sum[i] += sample.util
                util_count[i] += 1
    window_s = (t_last_step - t_first_step) if has_window else 0.0
    return {
        "rate_hz": rate_hz,
        "util_mean": [round(util_sum[i] / util_count[i], 1) if util_count[i] else None
                      for i in range(len(device_names))],
        "samples": len(samples),
        "samples_per_s": [round(count / window_s, 2) if window_s > 0 else None for count in in_window],
    }


def disagreements(util_mean: list[float | None], devices_busy: list[float | None],
                  device_names: list[str], tolerance_points: float = 10.0) -> list[str]:
    """Where the OS's utilization and the engine's busy fraction differ by more than
    ``tolerance_points`` (percentage points), one line per device, for the summary.

    ``devices_busy`` is the engine-timed busy fraction (0..1) per device. The two
    measure different things (the OS counts any work on the core or GPU, the
    engine only the intervals it timed), so a gap is worth showing, not an error.
    """
    lines = []
    for name, util, busy in zip(device_names, util_mean, devices_busy):
        if util is None or busy is None:
            continue
        engine_percent = 100.0 * busy
        if abs(util - engine_percent) > tolerance_points:
            lines.append(f"{name}: the OS measured {util:.1f}% busy, the engine timed {engine_percent:.1f}% "
                         f"(more than {tolerance_points:g} points apart)")
    return lines
