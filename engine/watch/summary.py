"""What a watched script's steps add up to: each device's time per step by kind and its idle time
(engine/record/time_by_kind.py, as an engine run's summary has them), and the line that says which device
idles or waits most and on what."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from engine.measure.timing import busy_time
from engine.record import time_by_kind
from engine.record.rank_events import StepReport
from engine.results import DeviceKinds


@dataclass(frozen=True)
class DeviceTimes(DeviceKinds):
    """A device's measured steps (DeviceKinds: their mean, by kind and idle), how many, and its samples a second."""
    steps: int = 0
    samples_per_s: float | None = None


@dataclass(frozen=True)
class WatchSummary:
    """A watched script: how it ended and what its measured steps (after ``warmup``) add up to."""
    script: str
    args: list[str]
    devices: list[str]
    status: str                        # "finished", "failed" or "stopped"
    steps: int = 0                     # steps every rank finished
    warmup: int = 0
    loss: float | None = None          # the last step's, the ranks' mean
    times: list[DeviceTimes] = field(default_factory=list)
    diagnosis: str | None = None
    error: str | None = None
    traceback: str | None = None
    loader_cores: list[int] = field(default_factory=list)   # where DataLoader workers ran (none: their rank's core)


def device_times(device: str, reports: list[StepReport], warmup: int) -> DeviceTimes | None:
    """``device``'s mean step over its reports after ``warmup``; None when none is left."""
    measured = [r for r in reports if r.step >= warmup]
    if not measured:
        return None
    kinds: dict[str, float] = {}
    idle = []
    for report in measured:
        intervals = report.intervals.get(device, [])
        for kind, t0, t1 in intervals:
            kinds[kind] = kinds.get(kind, 0.0) + (t1 - t0) / len(measured)
        idle.append(max(0.0, (report.end - report.start) - busy_time(intervals)))
    step = statistics.fmean(r.end - r.start for r in measured)
    samples = sum(r.samples for r in measured)
    return DeviceTimes(device, step, {k: kinds[k] for k in time_by_kind.ordered(kinds)}, statistics.fmean(idle),
                       steps=len(measured),
                       samples_per_s=samples / (step * len(measured)) if samples and step > 0 else None)


def table(summary: WatchSummary) -> str:
    """The summary as the terminal shows it."""
    lines = [f"{summary.script}: {summary.status}, {summary.steps} steps on {', '.join(summary.devices)}"
             + (f" (the first {summary.warmup} left out of the figures)" if summary.warmup > 1 else
                " (the first left out of the figures)" if summary.warmup == 1 else "")]
    if summary.loss is not None:
        lines.append(f"loss (last step): {summary.loss:.6g}")
    lines.append("DataLoader workers: " + (f"on core{'s' if len(summary.loader_cores) > 1 else ''} "
                                           f"{', '.join(map(str, summary.loader_cores))}, which no device holds"
                                           if summary.loader_cores else "on their rank's core (no core is spare)"))
    if summary.times:
        lines.append("ms per step by kind:")
        lines += time_by_kind.table(summary.times)
        if any(t.samples_per_s for t in summary.times):
            lines.append("samples/s: " + "  ".join(f"{t.device} {t.samples_per_s:.0f}" for t in summary.times
                                                   if t.samples_per_s))
    if summary.diagnosis:
        lines.append(summary.diagnosis)
    if summary.error:
        lines.append(f"error: {summary.error}")
    return "\n".join(lines)
