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
