"""Poll: what one sampler pass reads once and shares between its targets.

Eight CPU virtual devices need one read of /proc/stat, not eight, and threads
of one process need one RSS read; a GPU's driver timestamps need one offset
from wall clock to perf_counter. Each is read lazily, the first time a target
asks, and only for this pass.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import psutil


class Poll:
    """One pass of the sampler over its targets."""

    def __init__(self, warn: Callable[[str], None] | None = None):
        self.t = time.perf_counter()
        # Wall clock minus perf_counter, read back to back: NVML stamps its
        # buffered samples with gettimeofday() microseconds.
        self.wall_minus_perf = time.time() - time.perf_counter()
        self._warn = warn
        self._cpu_times: tuple[float, list[Any]] | None = None
        self._rss: dict[int, int | None] = {}

    def warn(self, message: str) -> None:
        """Pass a warning to the sampler (targets decide to warn only once)."""
        if self._warn is not None:
            self._warn(message)

    def perf_from_wall_us(self, wall_us: int) -> float:
        """A wall-clock microsecond timestamp on the perf_counter clock."""
        return wall_us / 1e6 - self.wall_minus_perf

    def cpu_times(self) -> tuple[float, list[Any]]:
        """(perf_counter time of the read, psutil.cpu_times(percpu=True))."""
        if self._cpu_times is None:
            self._cpu_times = (time.perf_counter(), psutil.cpu_times(percpu=True))
        return self._cpu_times

    def rss(self, pid: int, process: psutil.Process | None) -> int | None:
        """Resident set size of ``pid`` in bytes; None when it has exited."""
        if pid not in self._rss:
            self._rss[pid] = _read_rss(process)
        return self._rss[pid]


def _read_rss(process: psutil.Process | None) -> int | None:
    if process is None:
        return None
    try:
        rss = process.memory_info().rss
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
        return None
    # An exited but unreaped child reads as 0 bytes: dead as far as the user cares.
    return rss or None
