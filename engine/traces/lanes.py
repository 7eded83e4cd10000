"""A rank's lanes for the timeline, kept only where asked (the app's File › Open traces…, ``trace --store``): the
kernels of its last few iterations by kind, the GPU's idle gaps between them by cause, and its busy share over
its whole kept span in columns (the cluster view's heatmap). The figures never read these: they are what a run's
timeline and telemetry plots draw (engine/traces/as_run.py stores them as a run's).

- **Kinds**: each kernel type's merged intervals (compute, communication, memory, sync: HTA's types,
  engine/traces/kernels.py), each interval under the iteration of its first kernel.
- **Idle gaps**: where no kernel of any stream runs, between two of the GPU's merged busy intervals; the gap is
  the next kernel's, and takes HTA's category of a stream's gap (engine/traces/figures.py) at the level of the
  whole GPU: **host wait** where every kernel starting at the gap's end was launched after the gap began (the GPU
  waited for the CPU), else **kernel wait** where the gap is under the consecutive kernel delay, else **other**.
- **Bounded**: at most ``MOST_INTERVALS`` a rank. A rank with more (thousands of small kernels an iteration) has
  gaps shorter than a resolution joined (the intervals either side become one, and the gap is not drawn), the
  resolution doubling until they fit; a pixel of the timeline spans more than that anyway.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.traces.figures import HOST_WAIT, KERNEL_WAIT, OTHER_IDLE
from engine.traces.kernels import COMMUNICATION, COMPUTATION, MEMORY, OTHER, Interval
from engine.traces.timeline import KINDS, Timeline

# The timeline's kinds of a trace's lanes, by the kernel type or idle category they draw (their colours:
# engine/figures/palette.py KIND_COLORS; the idle ones are thin bands: engine/figures/timeline.py KIND_HEIGHT).
BUSY_LANE_KINDS = {COMPUTATION: "compute", COMMUNICATION: "communication", MEMORY: "memory", OTHER: "sync"}
IDLE_LANE_KINDS = {HOST_WAIT: "host-wait", KERNEL_WAIT: "kernel-wait", OTHER_IDLE: "other-idle"}
LANE_KINDS = (*BUSY_LANE_KINDS.values(), *IDLE_LANE_KINDS.values())
LANE_MEANING = {
    "compute": "compute kernels (HTA's COMPUTATION: any kernel not NCCL, memcpy, memset or sync)",
    "communication": "NCCL kernels: a collective or a send/receive, from the rank's arrival (its wait included)",
    "memory": "memcpy and memset kernels (HTA's MEMORY)",
    "sync": "CUDA synchronizations on the GPU (busy, in no kernel type)",
    "host-wait": "the GPU idle, waiting for the CPU: the next kernel was launched after the gap began",
    "kernel-wait": "the GPU idle less than the consecutive kernel delay between back-to-back kernels (launch "
                   "overhead)",
    "other-idle": "the GPU idle, its next kernel launched in time: waiting on another stream, rank or the host",
}
LANE_ITERATIONS = 3        # the timeline shows 3 steps (engine/figures/timeline.py TIMELINE_STEPS)
MOST_INTERVALS = 4000      # a rank's lane intervals at most: 64 ranks' fit the store and the timeline's bars
BUSY_COLUMNS = 600         # a rank's busy share over its span, in this many columns (a heatmap's width)


@dataclass(frozen=True)
class LaneRequest:
    """What of a rank's kernels to keep for the timeline: its last ``iterations`` iterations' lanes, and its busy
    share in ``columns`` columns."""
    iterations: int = LANE_ITERATIONS
    columns: int = BUSY_COLUMNS


@dataclass(frozen=True)
class RankLanes:
    """One rank's lanes, in µs on the clock its trace recorded."""
    rank: int
    intervals: list[tuple[int, str, float, float]] = field(default_factory=list)   # (iteration, kind, start, end)
    bounds: dict[int, tuple[float, float]] = field(default_factory=dict)   # each iteration's first and last kernel
    busy: list[tuple[float, float]] = field(default_factory=list)   # (a column's middle, the share busy 0..1)
    resolution_us: float = 0.0    # gaps shorter than this were joined (0: every kernel as recorded)


def rank_lanes(rank: int, timeline: Timeline, by_iteration: dict[int, list[int]], delay: float,
               request: LaneRequest, all_kept: list[int]) -> RankLanes:
    """The lanes of ``rank``: ``by_iteration`` its kept events' positions by iteration (-1: launched outside every
    ProfilerStep, drawn only where it has no ProfilerStep), ``all_kept`` every kept position (the busy columns')."""
    steps = sorted(i for i in by_iteration if i >= 0)
    shown = steps[-request.iterations:] if steps else [i for i in (-1,) if i in by_iteration]
    positions = sorted((p for i in shown for p in by_iteration[i]), key=timeline.ts.__getitem__)
    span = (max(timeline.end[p] for p in positions) - timeline.ts[positions[0]]) if positions else 0.0
    resolution = 0.0
    intervals = lane_intervals(timeline, positions, delay, resolution)
    while len(intervals) > MOST_INTERVALS and span > 0:
        resolution = max(2 * resolution, span / MOST_INTERVALS)
        intervals = lane_intervals(timeline, positions, delay, resolution)
    bounds = {}
    for iteration in steps:
        kept = by_iteration[iteration]
        bounds[iteration] = (min(timeline.ts[p] for p in kept), max(timeline.end[p] for p in kept))
    return RankLanes(rank, intervals, bounds, busy_columns(timeline, all_kept, request.columns), resolution)


def lane_intervals(timeline: Timeline, positions: list[int], delay: float,
                   resolution: float = 0.0) -> list[tuple[int, str, float, float]]:
    """(iteration, kind, start, end) of ``positions`` (sorted by start): each kernel type's merged intervals and the
    GPU's idle gaps by category; gaps up to ``resolution`` joined."""
    out: list[tuple[int, str, float, float]] = []
    for index, kind in enumerate(KINDS):
        mine = [p for p in positions if timeline.kind[p] == index]
        out += [(iteration, BUSY_LANE_KINDS[kind], start, end)
                for iteration, start, end, _ in _joined(timeline, mine, resolution)]
    groups = _joined(timeline, positions, resolution)
    for (_, _, before_end, _), (iteration, start, _, late) in zip(groups, groups[1:], strict=False):
        if start - before_end <= resolution:
            continue
        category = HOST_WAIT if late(before_end) else KERNEL_WAIT if start - before_end < delay else OTHER_IDLE
        out.append((iteration, IDLE_LANE_KINDS[category], before_end, start))
    return sorted(out, key=lambda row: row[2])


def _joined(timeline: Timeline, positions: list[int], resolution: float):
    """The events at ``positions`` (sorted by start) joined where they overlap, touch or leave a gap up to
    ``resolution``: (iteration of the first, start, end, launched_after) with ``launched_after(t)`` whether every
    event starting at the group's start was launched after ``t`` (an unknown launch was not)."""
    ts, end, launch, iteration = timeline.ts, timeline.end, timeline.launch, timeline.iteration
    groups: list[list] = []
    for p in positions:
        if groups and ts[p] - groups[-1][2] <= resolution:   # overlapping, touching, or a gap joined
            group = groups[-1]
            group[2] = max(group[2], end[p])
            if ts[p] == group[1]:
                group[3].append(launch[p])
        else:
            groups.append([iteration[p], ts[p], end[p], [launch[p]]])
    return [(it, start, stop, _launched_after(launches)) for it, start, stop, launches in groups]


def _launched_after(launches: list[float]):
    return lambda t: all(launch > t for launch in launches)   # NaN > t is False: not known to be late


def busy_columns(timeline: Timeline, positions: list[int], columns: int) -> list[tuple[float, float]]:
    """The share of each of ``columns`` equal columns of the events' span in which any of them runs."""
    merged: list[Interval] = []
    for start, stop in sorted((timeline.ts[p], timeline.end[p]) for p in positions):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    if not merged or columns <= 0 or merged[-1][1] <= merged[0][0]:
        return []
    # from the first start: the traces' µs since the epoch (1.7e15) leave a column's edge a quarter µs to round by
    first = merged[0][0]
    width = (merged[-1][1] - first) / columns
    busy = [0.0] * columns
    for start, stop in ((start - first, stop - first) for start, stop in merged):
        k = min(int(start / width), columns - 1)
        while start < stop and k < columns:
            edge = (k + 1) * width if k < columns - 1 else stop
            busy[k] += min(stop, edge) - start
            start, k = edge, k + 1
    return [(first + (k + 0.5) * width, min(1.0, busy[k] / width)) for k in range(columns)]
