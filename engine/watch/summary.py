"""What a watched script's steps add up to: each device's time per step by kind, its idle time, and the one
line that says which device idles most and on what."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from engine.measure.timing import busy_time
from engine.record.rank_events import StepReport

# The order a table lists kinds in (engine/measure/timing.py names them; figures colour them alike).
KIND_ORDER = ("forward", "backward", "communication", "wait", "optimizer", "data")


@dataclass(frozen=True)
class DeviceTimes:
    """One device's measured steps: mean seconds per step, in all and by kind (kinds may overlap: DDP's
    all-reduce runs under the backward), and the part of the step in none of them."""
    device: str
    steps: int
    step_s: float
    by_kind: dict[str, float] = field(default_factory=dict)
    idle_s: float = 0.0
    samples_per_s: float | None = None

    @property
    def idle_share(self) -> float:
        return self.idle_s / self.step_s if self.step_s > 0 else 0.0


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
    return DeviceTimes(device, len(measured), step, {k: kinds[k] for k in sorted(kinds, key=_kind_rank)},
                       statistics.fmean(idle), samples / (step * len(measured)) if samples and step > 0 else None)


def _kind_rank(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def diagnosis(times: list[DeviceTimes]) -> str | None:
    """The device that idles or waits most, and on what, in words: "cpu:1 waits 52 % of each step on data
    (the input pipeline)"."""
    if not times:
        return None
    waits = []
    for t in times:
        waits += [(t.idle_share, t.device, "idle (waiting on a peer: the split, the schedule or a slower rank)")]
        waits += [(t.by_kind.get("data", 0.0) / t.step_s, t.device, "on data (the input pipeline)")] \
            if t.step_s > 0 else []
    share, device, what = max(waits)
    if share < 0.1:
        return f"every device busy at least {100 * (1 - share):.0f} % of each step"
    return f"{device} is {'' if what.startswith('idle') else 'waiting '}{what}: {100 * share:.0f} % of each step"


def table(summary: WatchSummary) -> str:
    """The summary as the terminal shows it."""
    lines = [f"{summary.script}: {summary.status}, {summary.steps} steps on {', '.join(summary.devices)}"
             + (f" (the first {summary.warmup} left out of the figures)" if summary.warmup > 1 else
                " (the first left out of the figures)" if summary.warmup == 1 else "")]
    if summary.loss is not None:
        lines.append(f"loss (last step): {summary.loss:.6g}")
    kinds = [k for k in KIND_ORDER if any(k in t.by_kind for t in summary.times)]
    kinds += sorted({k for t in summary.times for k in t.by_kind} - set(kinds))
    if summary.times:
        lines.append(f"{'device':<8} {'step ms':>8} " + " ".join(f"{k:>13}" for k in kinds) + f" {'idle':>8}"
                     + f" {'samples/s':>10}")
        for t in summary.times:
            lines.append(f"{t.device:<8} {1e3 * t.step_s:>8.1f} "
                         + " ".join(f"{1e3 * t.by_kind.get(k, 0.0):>10.1f} ms" for k in kinds)
                         + f" {100 * t.idle_share:>7.0f}%"
                         + (f" {t.samples_per_s:>10.0f}" if t.samples_per_s else f" {'':>10}"))
    if summary.diagnosis:
        lines.append(summary.diagnosis)
    if summary.error:
        lines.append(f"error: {summary.error}")
    return "\n".join(lines)
