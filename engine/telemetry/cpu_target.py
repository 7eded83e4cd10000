"""CpuTarget: a CPU virtual device, seen as the OS sees its core and its process.

A run's device (``own_work``) reads two utilizations between polls: its own, the
time the threads of its process that are pinned to the core ran there or were
ready to and waited for it (the kernel's per-thread run and run-queue times,
/proc/PID/task/TID/schedstat), over the period; and the core's total busy share
from the kernel's per-CPU tick counters (/proc/stat through psutil), as top's
per-CPU view computes it, which also counts other programs and the hypervisor's
steal time. The wait is counted as the device's work because the engine's timers
count it so: a forward that waited 10 ms for another program's slice took 10 ms
longer, on the timeline as on this device, and the wait is kept apart
(``wait_util``) to say why. The core's total less what the run's threads ran is
what others took (engine/telemetry/summary.py). The idle view's cores read the
total alone. Memory is the RSS of the process running on the device.
"""
from __future__ import annotations

import os
from typing import Any

import psutil

from engine.telemetry.poll import Poll, ThreadTimes
from engine.telemetry.sample import DeviceSample


def _busy_and_total(times: Any) -> tuple[float, float]:
    # guest and guest_nice are already counted inside user and nice on Linux;
    # idle and iowait are the time the core had nothing to run (as psutil.cpu_percent).
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


class CpuTarget:
    """One CPU virtual device: core ``core``'s busy %, and the RSS of ``pid`` if set. ``cores``: a device of several
    cores instead (a plain script's whole machine, engine/strategies/script.py): their busy % together, its own
    work the time of its threads that may run on no other core, over the time of all of them."""

    kind = "cpu"

    def __init__(self, name: str, core: int, pid: int | None = None, *, own_work: bool = False,
                 cores: tuple[int, ...] | None = None):
        self.name = name
        self.core = core
        self.cores = frozenset(cores) if cores else frozenset({core})
        self.pid = pid  # the sampler's set_pid changes it while running
        self.own_work = own_work
        self._ran: dict[int, ThreadTimes] = {}   # thread id -> its times at the last poll
        self._ran_pid: int | None = None
        self._ran_at: float | None = None
        self._process: psutil.Process | None = None
        self._process_pid: int | None = None
        self._last: tuple[float, float] | None = None  # (busy, total) seconds at the last poll
        self._mem_total: int | None = None
        self._warned_core = False

    def __repr__(self) -> str:
        return f"CpuTarget({self.name!r}, core={self.core}, pid={self.pid})"

    def open(self, poll: Poll) -> None:
        """Take the baseline, so the first poll already has a busy share."""
        self._mem_total = psutil.virtual_memory().total
        self._last = self._core_times(poll)
        if self.own_work:
            if poll.threads(os.getpid()) is None:
                self.own_work = False
                poll.warn(f"{self.name}: this system does not report threads' run times (/proc/PID/task/TID/"
                          "schedstat); its utilization is its core's total, other programs included")
            else:
                self._own_shares(poll)  # the baseline of a process named before the first poll

    def close(self) -> None:
        """Nothing to give back: a core's counters are read from /proc, held by no one."""

    def read(self, poll: Poll) -> list[DeviceSample]:
        t, _ = poll.cpu_times()
        current = self._core_times(poll)
        util = None
        if current is not None and self._last is not None:
            busy = current[0] - self._last[0]
            total = current[1] - self._last[1]
            if total > 0:
                # Rounded: tick counters are integers in 1/100 s, the division leaves float dust.
                util = round(min(100.0, max(0.0, 100.0 * busy / total)), 2)
        self._last = current
        pid = self.pid  # read once: set_pid may change it from another thread
        mem_used = None if pid is None else poll.rss(pid, self._process_for(pid))
        if not self.own_work:
            return [DeviceSample(t=t, device=self.name, util=util, mem_used=mem_used, mem_total=self._mem_total)]
        own, waited = self._own_shares(poll)
        return [DeviceSample(t=t, device=self.name, util=own, wait_util=waited, core_util=util,
                             mem_used=mem_used, mem_total=self._mem_total)]

    def read_memory(self, poll: Poll) -> list[DeviceSample]:
        """The process's RSS alone (no utilization: that spans a whole period between passes); none without a
        pid or once it exited."""
        pid = self.pid
        mem_used = None if pid is None else poll.rss(pid, self._process_for(pid))
        if mem_used is None:
            return []
        t, _ = poll.cpu_times()
        return [DeviceSample(t=t, device=self.name, util=None, mem_used=mem_used, mem_total=self._mem_total)]

    def _own_shares(self, poll: Poll) -> tuple[float | None, float | None]:
        """(percent of the time since the last poll that the process's threads pinned to the core ran there or
        waited to, percent they waited); 0 with no process (not launched yet, or exited): nothing of the run's
        is on the core. None, None on the first poll."""
        t, _ = poll.cpu_times()
        pid = self.pid
        threads = poll.threads(pid) if pid is not None else None
        if pid != self._ran_pid:
            # A new process: launched since the last poll (set_pid comes at its launch), so all its threads'
            # time falls in this period and counts from 0.
            self._ran, self._ran_pid = {}, pid
        ran = waited = 0.0
        for tid, times in (threads or {}).items():
            if times.cores <= self.cores:
                before = self._ran.get(tid)
                ran += max(0.0, times.ran_s - (before.ran_s if before else 0.0))
                waited += max(0.0, times.waited_s - (before.waited_s if before else 0.0))
        self._ran = dict(threads or {})
        previous, self._ran_at = self._ran_at, t
        if previous is None or t <= previous:
            return None, None
        period = t - previous
        # Capped at the whole period (two of the process's threads waiting for each other on the core count
        # twice), the wait as what it adds to the run time: util - wait_util stays the run time, of which the
        # core's total less it is others' (engine/telemetry/summary.py).
        period *= len(self.cores)
        ran_share = min(100.0, 100.0 * ran / period)
        own = min(100.0, ran_share + 100.0 * waited / period)
        return round(own, 2), round(own - ran_share, 2)

    def _core_times(self, poll: Poll) -> tuple[float, float] | None:
        _, per_cpu = poll.cpu_times()
        missing = sorted(core for core in self.cores if not 0 <= core < len(per_cpu))
        if missing:
            if not self._warned_core:
                self._warned_core = True
                poll.warn(f"{self.name}: core {missing[0]} is not online ({len(per_cpu)} cores); "
                          "its utilization is not available")
            return None
        busy_total = [_busy_and_total(per_cpu[core]) for core in sorted(self.cores)]
        return sum(b for b, _ in busy_total), sum(t for _, t in busy_total)

    def _process_for(self, pid: int) -> psutil.Process | None:
        # psutil.Process is kept across polls: building one reads /proc each time.
        if pid != self._process_pid:
            self._process_pid = pid
            try:
                self._process = psutil.Process(pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                self._process = None
        return self._process
