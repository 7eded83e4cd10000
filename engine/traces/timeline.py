"""A rank's GPU events as the figures take them: HTA 0.5.0's default filter applied, times rounded as HTA rounds
them, each event's type, launch time and iteration.

The filter is HTA's ``Trace._filter_irrelevant_gpu_kernels`` (``hta/common/trace.py``) with its default
``include_last_profiler_step=False``: where the rank has more than one ProfilerStep, a kernel is kept only if a CPU
event with its correlation (its CUDA launch) started before the last ProfilerStep did; so the last step's kernels,
cut off where the profiler stopped, are left out, and so are kernels that no CPU op launched. The CPU's own
events on a stream (rare) are kept if they started before the last step. With one ProfilerStep or none, HTA keeps
every event, and so does this (HTA decides by the ProfilerStep names of the whole job; this, by the rank's own).

A kernel's iteration is that of its launch: the ProfilerStep#N whose span [ts, ts + dur) holds the launch's
start (HTA's ``add_iteration``); -1 where none does."""
from __future__ import annotations

import bisect
import math
from array import array
from dataclasses import dataclass, field

from engine.traces.kernels import COMMUNICATION, COMPUTATION, MEMORY, OTHER, kernel_type
from engine.traces.records import RankRecords

KINDS = (COMPUTATION, COMMUNICATION, MEMORY, OTHER)     # a GPU event's ``kind`` is an index into this
NO_LAUNCH = math.nan


@dataclass
class Timeline:
    """The kept GPU events of one rank, in columns (position i of each is event i)."""
    ts: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    stream: array = field(default_factory=lambda: array("q"))
    kind: bytearray = field(default_factory=bytearray)
    kernel_category: bytearray = field(default_factory=bytearray)
    launch: array = field(default_factory=lambda: array("d"))       # its launch's start, NaN where unknown
    iteration: array = field(default_factory=lambda: array("q"))
    source: array = field(default_factory=lambda: array("q"))       # its position in the RankRecords
    steps: list[tuple[int, float, float]] = field(default_factory=list)   # (N, start, end), by start
    left_out_step: int | None = None                                # the last ProfilerStep, when filtered

    def __len__(self) -> int:
        return len(self.ts)

    def by_iteration(self) -> dict[int, list[int]]:
        """The positions of each iteration's events (-1: those launched outside every ProfilerStep)."""
        out: dict[int, list[int]] = {}
        for i, iteration in enumerate(self.iteration):
            out.setdefault(iteration, []).append(i)
        return out


def build(records: RankRecords) -> Timeline:
    rounded = records.fractional_times
    start_of = math.ceil if rounded else float

    def end_of(ts: float, dur: float) -> float:
        # HTA (round_down_time_stamps): the start up to the next µs, the end down to its µs
        return math.floor(ts + dur) if rounded else ts + dur
    steps = sorted(((n, start_of(ts), end_of(ts, dur)) for n, ts, dur in records.steps), key=lambda s: s[1])
    timeline = Timeline(steps=steps)
    filtered = len(records.step_names) > 1 and bool(steps)
    last_start = max(s[1] for s in steps) if filtered else math.inf
    if filtered:
        timeline.left_out_step = max(steps, key=lambda s: s[1])[0]
    launches: dict[int, float] = {}
    for correlation, ts in zip(records.launch_correlation, records.launch_ts, strict=True):
        launches[correlation] = start_of(ts)
    kept_correlations = {c for c, ts in launches.items() if ts < last_start} if filtered else None
    starts = [s[1] for s in steps]
    kinds_by_name = [KINDS.index(kernel_type(name)) for name in records.names]
    for i in range(len(records.ts)):
        ts = start_of(records.ts[i])
        if records.launched[i]:
            correlation = records.correlation[i]
            if kept_correlations is not None and correlation not in kept_correlations:
                continue
            launch = launches.get(correlation, NO_LAUNCH)
        else:
            if ts >= last_start:
                continue
            launch = NO_LAUNCH
        timeline.ts.append(ts)
        timeline.end.append(end_of(records.ts[i], records.dur[i]))
        timeline.stream.append(records.stream[i])
        timeline.kind.append(kinds_by_name[records.name[i]])
        timeline.kernel_category.append(records.kernel_category[i])
        timeline.launch.append(launch)
        timeline.iteration.append(_iteration(launch, starts, steps))
        timeline.source.append(i)
    return timeline


def _iteration(at: float, starts: list[float], steps: list[tuple[int, float, float]]) -> int:
    if at != at:     # NaN: no launch
        return -1
    k = bisect.bisect_right(starts, at) - 1
    return steps[k][0] if k >= 0 and at < steps[k][2] else -1
