"""A rank's GPU figures, each as HTA 0.5.0 defines it (``hta/analyzers/breakdown_analysis.py``,
``communication_analysis.py``), over a set of its kept GPU events (a Timeline's positions): all of them, or one
iteration's.

- span: the first event's start to the last one's end (``_get_idle_time_for_kernels``);
- idle: the span less the time any GPU event runs (the events' merged intervals);
- compute: the time compute kernels run (merged); non-compute: the rest of the busy time (communication,
  memory, and the rest: syncs);
- communication overlapped by compute: the time both run, over the time communication runs
  (``get_comm_comp_overlap``);
- idle by stream and category: each stream's gaps between its consecutive kernels (HTA's kernel categories only),
  each gap the later kernel's: host wait where its launch started after the earlier kernel ended (the CPU was
  late), else kernel wait where the gap is under ``consecutive_kernel_delay`` (launch overhead), else other; a
  stream's first kernel has no gap, and counts as other with 0 (``get_idle_time_breakdown``);
- time by kernel type and by the types' overlaps (``get_gpu_kernel_breakdown`` with include_memory_kernels).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.traces.kernels import COMMUNICATION, COMPUTATION, MEMORY, Interval, by_overlap, covered, merged, overlap
from engine.traces.timeline import KINDS, Timeline

HOST_WAIT, KERNEL_WAIT, OTHER_IDLE = "host_wait", "kernel_wait", "other"
CONSECUTIVE_KERNEL_DELAY = 30     # HTA's default, in the unit times are in (µs; HTA's docstring says ns)


@dataclass(frozen=True)
class Temporal:
    span_us: float = 0.0
    idle_us: float = 0.0
    compute_us: float = 0.0
    non_compute_us: float = 0.0

    def pct(self, part: float) -> float:
        return 100 * part / self.span_us if self.span_us > 0 else 0.0


class Selection:
    """Some of a timeline's events (their positions), with the merged intervals of each kind made once: every
    figure below takes these."""

    def __init__(self, timeline: Timeline, positions: list[int]):
        self.timeline = timeline
        self.positions = positions
        self._merged: dict[str | None, list[Interval]] = {}

    def merged(self, kind: str | None = None) -> list[Interval]:
        """The merged intervals of the events (of one kind only, where given)."""
        if kind not in self._merged:
            ts, end = self.timeline.ts, self.timeline.end
            if kind is None:
                self._merged[kind] = merged((ts[i], end[i]) for i in self.positions)
            else:
                wanted, kinds = KINDS.index(kind), self.timeline.kind
                self._merged[kind] = merged((ts[i], end[i]) for i in self.positions if kinds[i] == wanted)
        return self._merged[kind]


def temporal(selection: Selection) -> Temporal:
    busy = selection.merged()
    if not busy:
        return Temporal()
    span = busy[-1][1] - busy[0][0]
    idle = span - covered(busy)
    compute = covered(selection.merged(COMPUTATION))
    return Temporal(span, idle, compute, span - compute - idle)


def comm_comp_overlap_pct(selection: Selection) -> float | None:
    """The share of communication time that compute overlaps, in percent; None without communication."""
    communication = selection.merged(COMMUNICATION)
    total = covered(communication)
    if total <= 0:
        return None
    return 100 * overlap(communication, selection.merged(COMPUTATION)) / total


def kernel_type_us(selection: Selection) -> dict[str, float]:
    return by_overlap({kind: selection.merged(kind) for kind in (COMPUTATION, COMMUNICATION, MEMORY)})


def idle_by_stream_category(selection: Selection, consecutive_kernel_delay: float = CONSECUTIVE_KERNEL_DELAY
                            ) -> dict[str, dict[str, float]]:
    """{stream: {category: µs}}, each category listed where a kernel fell in it (as HTA lists them)."""
    timeline = selection.timeline
    ts, end, launch = timeline.ts, timeline.end, timeline.launch
    by_stream: dict[int, list[int]] = {}
    for i in selection.positions:
        if timeline.kernel_category[i]:
            by_stream.setdefault(timeline.stream[i], []).append(i)
    out: dict[str, dict[str, float]] = {}
    for stream in sorted(by_stream):
        kernels = sorted(by_stream[stream], key=ts.__getitem__)
        categories = {OTHER_IDLE: 0.0}        # the first kernel's: no gap before it
        for before, i in zip(kernels, kernels[1:], strict=False):
            gap = ts[i] - end[before]
            if launch[i] > end[before]:        # False for NaN: no launch known
                category = HOST_WAIT
            elif gap < consecutive_kernel_delay:
                category = KERNEL_WAIT
            else:
                category = OTHER_IDLE
            categories[category] = categories.get(category, 0.0) + gap
        out[str(stream)] = categories
    return out


def top_idle_category(by_stream: dict[str, dict[str, float]]) -> tuple[str, float] | None:
    """The category with the most idle time over the rank's streams, and its share of their idle time (0..1)."""
    totals: dict[str, float] = {}
    for categories in by_stream.values():
        for category, us in categories.items():
            totals[category] = totals.get(category, 0.0) + us
    whole = sum(totals.values())
    if whole <= 0:
        return None
    category = max(totals, key=totals.get)
    return category, totals[category] / whole
