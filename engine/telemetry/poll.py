"""Poll: what one sampler pass reads once and shares between its targets.

Eight CPU virtual devices need one read of /proc/stat, not eight, and threads
of one process need one RSS read; a GPU's driver timestamps need one offset
from wall clock to perf_counter. Each is read lazily, the first time a target
asks, and only for this pass.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import psutil


class ThreadTimes(NamedTuple):
    """One thread's counters since it started (/proc/PID/task/TID/schedstat)."""
    ran_s: float
    """Seconds it ran on a core."""
    waited_s: float
    """Seconds it was ready to run but waited on a core's run queue (another thread or program held the core)."""
    cores: frozenset[int]
    """The cores it may run on."""


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
        self._threads: dict[int, dict[int, ThreadTimes] | None] = {}

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

    def threads(self, pid: int) -> dict[int, ThreadTimes] | None:
        """Each thread of ``pid`` by its id; None when the process is gone or the kernel does not tell (no /proc/PID/task/TID/schedstat)."""
        if pid not in self._threads:
            self._threads[pid] = _read_threads(pid)
        return self._threads[pid]

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


def _read_threads(pid: int) -> dict[int, ThreadTimes] | None:
    # schedstat's first two fields are the thread's time on a core and its time waiting on a run queue, in
    # nanoseconds (the scheduler's own clock, without the hypervisor's steal time where the kernel accounts
    # it), not 10 ms ticks: a 100 ms period reads to the microsecond. A thread that ends between the listing
    # and the read is skipped.
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    threads: dict[int, ThreadTimes] = {}
    for name in tids:
        tid = int(name)
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                ran_ns, waited_ns = (int(field) for field in f.read().split()[:2])
            cores = frozenset(os.sched_getaffinity(tid))
        except (OSError, ValueError):
            continue
        threads[tid] = ThreadTimes(ran_ns / 1e9, waited_ns / 1e9, cores)
    return threads or None
