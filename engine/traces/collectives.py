"""Across ranks: which NCCL kernels are one collective, who arrived last at each, the wait that set, and the time
the whole job's GPUs idled together.

A collective's kernels end together on every rank taking part (none can finish before the last has arrived and
sent its part), and each started when its rank got there. So kernels of one iteration, stream and name on
different ranks whose ends lie within ``max(MATCH_US, MATCH_SHARE x the shortest one)`` of each other are taken
as one collective; the rank whose kernel started last arrived last, and every other rank waited from its own
kernel's start to that one (at most its kernel's length). Times are those the traces recorded (HTA takes them
so too): ranks on one host share a clock; ranks on hosts whose clocks disagree by more than that window are not
matched. A point-to-point pair's kernels match as a collective of two."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.traces.kernels import Interval, covered, merged

MATCH_US = 50.0
MATCH_SHARE = 0.05


@dataclass(frozen=True)
class CommKernel:
    iteration: int
    stream: int
    kernel: str
    ts: float
    end: float


@dataclass
class Waits:
    """The waits at the collectives matched, by iteration and rank."""
    matched: int = 0                                              # collectives (of two ranks or more)
    waited: dict[int, dict[int, float]] = field(default_factory=dict)    # iteration -> rank -> µs waited
    set_by: dict[int, dict[int, float]] = field(default_factory=dict)    # iteration -> rank -> others' µs it set

    def rank_wait(self, rank: int, iteration: int | None = None) -> float:
        if iteration is not None:
            return self.waited.get(iteration, {}).get(rank, 0.0)
        return sum(by_rank.get(rank, 0.0) for by_rank in self.waited.values())


def match_waits(kernels_by_rank: dict[int, list[CommKernel]]) -> Waits:
    waits = Waits()
    groups: dict[tuple[int, int, str], list[tuple[float, float, int]]] = {}
    for rank, kernels in kernels_by_rank.items():
        for k in kernels:
            groups.setdefault((k.iteration, k.stream, k.kernel), []).append((k.end, k.ts, rank))
    for (iteration, _, _), ends in groups.items():
        for instance in _instances(sorted(ends)):
            waits.matched += 1
            last_rank, last_start = max(((rank, ts) for _, ts, rank in instance), key=lambda rt: (rt[1], -rt[0]))
            waited = waits.waited.setdefault(iteration, {})
            setting = 0.0
            for end, ts, rank in instance:
                wait = min(max(0.0, last_start - ts), end - ts)
                waited[rank] = waited.get(rank, 0.0) + wait
                setting += wait
            by_rank = waits.set_by.setdefault(iteration, {})
            by_rank[last_rank] = by_rank.get(last_rank, 0.0) + setting
    return waits


def _instances(ends: list[tuple[float, float, int]]) -> list[list[tuple[float, float, int]]]:
    """Kernels (end, start, rank), by end, grouped where their ends lie within the window of the group's first
    (one kernel per rank); groups of one are no collective seen."""
    found: list[list[tuple[float, float, int]]] = []
    group: list[tuple[float, float, int]] = []
    for kernel in ends:
        end, ts, rank = kernel
        if group:
            shortest = min(min(e - s for e, s, _ in group), end - ts)
            window = max(MATCH_US, MATCH_SHARE * shortest)
            if end - group[0][0] <= window and all(r != rank for _, _, r in group):
                group.append(kernel)
                continue
            if len(group) > 1:
                found.append(group)
        group = [kernel]
    if len(group) > 1:
        found.append(group)
    return found


def job_idle(busy_by_rank: list[list[Interval]]) -> tuple[float, float] | None:
    """(span, idle): from the first busy moment of any rank to the last, and the time within it no rank was busy."""
    union = merged(interval for busy in busy_by_rank for interval in busy)
    if not union:
        return None
    span = union[-1][1] - union[0][0]
    return span, span - covered(union)


def straggler_of(set_by: dict[int, float]) -> tuple[int, float] | None:
    """The rank that set the most wait (the lowest such rank on a tie), and how much; None where none was set."""
    if not set_by or max(set_by.values()) <= 0:
        return None
    rank = min(set_by, key=lambda r: (-set_by[r], r))
    return rank, set_by[rank]
