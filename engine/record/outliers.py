"""The devices to look at first in a run of many: those that idle most, wait most on communication or input, or
hold the most memory, and the straggler of a job whose devices all meet at collectives.

With 64 devices no one reads 64 lines; the app lists these beside its plots (app/views/plots/outlier_list.py) and
the CLI prints them under a run of many devices. The figures are the run's own: each device's time per step by
kind (DeviceKinds: the summary's, or ``step_kinds`` of the live timeline's last steps) and its memory used.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from engine.measure.timing import busy_time
from engine.record.time_by_kind import ordered
from engine.results import DeviceKinds

NOTABLE = 0.05          # of a step: how far above the median device a share must be to be worth a line
MEMORY_ABOVE = 1.2      # a device holding this many times the median device's memory is listed
STRAGGLER_GAP = 0.05    # of a step: how much less than the median device it must wait at collectives
GIB = 2 ** 30


@dataclass(frozen=True)
class Outlier:
    device: str
    what: str        # "idle", "communication", "data", "memory" or "straggler"
    share: float     # of its step (memory: times the median device's)
    text: str        # the line the list and the CLI show


def step_kinds(steps: Iterable[tuple[int, Mapping[str, list]]]) -> list[DeviceKinds]:
    """Each device's mean seconds per step by kind over these steps' intervals ({device: [[kind, t0, t1],
    ...]}, the live timeline's), idle the step's span (its first interval's start to its last one's end)
    less the device's busy time; a device with no interval in a step idled all of it."""
    steps = [(step, intervals) for step, intervals in steps
             if any(rows for rows in intervals.values())]
    devices = list(dict.fromkeys(device for _, intervals in steps for device in intervals))
    kind_time: dict[str, dict[str, float]] = {device: {} for device in devices}
    idle = dict.fromkeys(devices, 0.0)
    total = 0.0
    for _step, intervals in steps:
        spans = [(t0, t1) for rows in intervals.values() for _, t0, t1 in rows]
        span = max(t1 for _, t1 in spans) - min(t0 for t0, _ in spans)
        total += span
        for device in devices:
            rows = intervals.get(device) or []
            kinds = kind_time[device]
            for kind, t0, t1 in rows:
                kinds[kind] = kinds.get(kind, 0.0) + (t1 - t0)
            idle[device] += max(0.0, span - busy_time(rows))
    if not steps or total <= 0:
        return []
    count = len(steps)
    return [DeviceKinds(device, total / count, {k: kinds[k] / count for k in ordered(kinds)}, idle[device] / count)
            for device, kinds in kind_time.items()]


def outliers(kinds: list[DeviceKinds], memory: Mapping[str, float] | None = None, limit: int = 8) -> list[Outlier]:
    """The devices worth a look, most first: the straggler, then the devices whose idle, communication or
    input-wait share stands out (NOTABLE of a step above the median device's; each device once, by its
    largest excess), then memory (MEMORY_ABOVE the median device). ``memory``: bytes used per device."""
    found: list[Outlier] = []
    slow = straggler(kinds)
    if slow is not None:
        found.append(slow)
    medians = {what: statistics.median(_share(d, what) for d in kinds) for what in WAITS} if kinds else {}
    waits = []
    for d in kinds:
        excess, what = max((_share(d, what) - medians[what], what) for what in WAITS)
        if excess >= NOTABLE and (slow is None or d.device != slow.device):
            waits.append((excess, Outlier(d.device, what, _share(d, what),
                                          _wait_text(d.device, what, _share(d, what), medians[what]))))
    found += [outlier for _, outlier in sorted(waits, key=lambda w: -w[0])]
    if memory and len(memory) > 1:
        median = statistics.median(memory.values())
        big = [(used / median, device, used) for device, used in memory.items() if median > 0
               and used >= MEMORY_ABOVE * median]
        for times, device, used in sorted(big, reverse=True):
            found.append(Outlier(device, "memory", times,
                                 f"{device} holds {used / GIB:.3g} GiB, {times:.1f}x the median device"))
    return found[:limit]


def straggler(kinds: list[DeviceKinds]) -> Outlier | None:
    """Where every device meets the others at collectives (data parallel: DDP's all-reduce, FSDP's gathers),
    the one the others wait for is the one that waits least there: its communication share is the smallest,
    at least STRAGGLER_GAP of a step below the median device's. None otherwise."""
    if len(kinds) < 3 or not all(d.by_kind.get("communication") for d in kinds):
        return None
    shares = {d.device: d.share("communication") for d in kinds}
    median = statistics.median(shares.values())
    device = min(shares, key=shares.get)
    gap = median - shares[device]
    if gap < STRAGGLER_GAP:
        return None
    slow = next(d for d in kinds if d.device == device)
    data = slow.share("data")
    why = f"; it waits on its input {100 * data:.0f} % of each step" if data >= NOTABLE else ""
    return Outlier(device, "straggler", gap,
                   f"{device} is the straggler: the others wait for it at each collective, "
                   f"{100 * gap:.0f} % of a step more than it does{why}")


def alike(kinds: list[DeviceKinds]) -> str:
    """What the devices share when none stands out: "64 devices alike: idle 10 %, communication 33 % of
    each step (the median device)"."""
    shares = [f"{what} {100 * statistics.median(_share(d, what) for d in kinds):.0f} %" for what in WAITS]
    return f"{len(kinds)} devices alike: " + ", ".join(shares) + " of each step (the median device)"


WAITS = ("idle", "communication", "data")


def _share(d: DeviceKinds, what: str) -> float:
    return d.idle_share if what == "idle" else d.share(what)


def _wait_text(device: str, what: str, share: float, median: float) -> str:
    words = {"idle": "idles", "communication": "communicates (or waits at a collective)",
             "data": "waits on its input"}
    return f"{device} {words[what]} {100 * share:.0f} % of each step (median device {100 * median:.0f} %)"
