"""The cores this process may run on: what CPU virtual devices and the idle view's core series are made of.

A leaf module (the OS only): engine.devices and engine.telemetry both use it, and
neither needs the other to know it.
"""
from __future__ import annotations

import os


def usable_cores() -> list[int]:
    """The cores this process may run on, in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def parse_cores(text: str) -> list[int]:
    """"2,3" or "2-5" or "0,4-7": the cores, in order; ValueError saying what is wrong."""
    cores: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"must be core numbers and ranges such as 2,3 or 2-5, got {text!r}")
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise ValueError(f"a range must go up, got {part!r}")
        cores.update(range(low, high + 1))
    return sorted(cores)
