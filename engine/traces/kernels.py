"""What a GPU event is and the interval arithmetic the figures share.

The kernel types are HTA 0.5.0's (``hta/utils/utils.py``, ``get_kernel_type``; MIT licence): the same regular
expressions, tried in the same order, so that a kernel counts where HTA counts it."""
from __future__ import annotations

import re
from collections.abc import Iterable

COMPUTATION, COMMUNICATION, MEMORY, OTHER = "COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"
# HTA's order for "A overlapping B" names (get_gpu_kernel_breakdown with include_memory_kernels)
OVERLAP_ORDER = (COMPUTATION, COMMUNICATION, MEMORY)

_COMMUNICATION = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTATION = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

# The categories HTA's idle time breakdown takes as kernels (its cuda_sync events are left out there).
KERNEL_CATEGORIES = frozenset(("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy",
                               "mtia_ccp_events"))
# Device-wide synchronizations: on no stream, but GPU events to HTA (never a launch on the CPU's side)
SYNC_NAMES = frozenset(("Event Sync", "Context Sync"))


def kernel_type(name: str) -> str:
    if _COMMUNICATION.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    if not _NOT_COMPUTATION.match(name):
        return COMPUTATION
    return OTHER


Interval = tuple[float, float]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """Overlapping or touching intervals joined, in order of start (HTA's ``merge_kernel_intervals``: an interval
    starts a new group only where it starts after every earlier one has ended)."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1][1] = end
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def covered(intervals: list[Interval]) -> float:
    """The time merged intervals cover."""
    return sum(end - start for start, end in intervals)


def overlap(a: list[Interval], b: list[Interval]) -> float:
    """The time two lists of merged intervals cover together."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            total += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def by_overlap(merged_by_type: dict[str, list[Interval]]) -> dict[str, float]:
    """Time by kernel type and by the types' overlaps ("COMPUTATION overlapping COMMUNICATION"), from each type's
    merged intervals: HTA's ``_get_gpu_kernel_type_time`` (a sweep over the types' starts and ends; each piece
    of time counted in whole units, as HTA's ``astype(int)`` does)."""
    bits = {kind: 1 << i for i, kind in enumerate(OVERLAP_ORDER)}
    points: list[tuple[float, int]] = []
    for kind, intervals in merged_by_type.items():
        for start, end in intervals:
            points += [(start, bits[kind]), (end, -bits[kind])]
    points.sort(key=lambda p: p[0])
    names: dict[int, str] = {}
    out: dict[str, float] = {}
    running = 0
    for (time, change), following in zip(points, points[1:], strict=False):
        running += change
        if running > 0:
            if running not in names:
                names[running] = " overlapping ".join(k for k in OVERLAP_ORDER if running & bits[k])
            name = names[running]
            out[name] = out.get(name, 0.0) + float(int(following[0] - time))
    return out
