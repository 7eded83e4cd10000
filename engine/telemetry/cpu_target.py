"""CpuTarget: a CPU virtual device, seen as the OS sees its core and its process.

A run's device (``own_work``) reads two utilizations between polls: its own, the
time the threads of its process that are pinned to the core ran there (the
kernel's per-thread run time, /proc/PID/task/TID/schedstat), over the period; and
the core's total busy share from the kernel's per-CPU tick counters (/proc/stat
through psutil), as top's per-CPU view computes it, which also counts other
programs and the hypervisor's steal time. The gap between the two is what
disturbed the run (engine/telemetry/summary.py). The idle view's cores read the
total alone. Memory is the RSS of the process running on the device.
"""
from __future__ import annotations

import os
from typing import Any

import psutil

from engine.telemetry.poll import Poll
from engine.telemetry.sample import DeviceSample


def _busy_and_total(times: Any) -> tuple[float, float]:
    # guest and guest_nice are already counted inside user and nice on Linux;
    # idle and iowait are the time the core had nothing to run (as psutil.cpu_percent).
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


class CpuTarget:
    """One CPU virtual device: core ``core``'s busy %, and the RSS of ``pid`` if set."""

    kind = "cpu"

    def __init__(self, name: str, core: int, pid: int | None = None, *, own_work: bool = False):
        self.name = name
        self.core = core
        self.pid = pid  # the sampler's set_pid changes it while running
        self.own_work = own_work
        self._ran: dict[int, float] = {}   # thread id -> seconds it had run on a core, at the last poll
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
                self._own_share(poll)  # the baseline of a process named before the first poll

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
        return [DeviceSample(t=t, device=self.name, util=self._own_share(poll), core_util=util,
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

    def _own_share(self, poll: Poll) -> float | None:
        """Percent of the time since the last poll that the process's threads pinned to the core ran; 0 with
        no process (not launched yet, or exited): nothing of the run's is on the core."""
        t, _ = poll.cpu_times()
        pid = self.pid
        threads = poll.threads(pid) if pid is not None else None
        if pid != self._ran_pid:
            # A new process: launched since the last poll (set_pid comes at its launch), so all its threads'
            # time falls in this period and counts from 0.
            self._ran, self._ran_pid = {}, pid
        ran = 0.0
        for tid, (seconds, cores) in (threads or {}).items():
            if cores == {self.core}:
                ran += max(0.0, seconds - self._ran.get(tid, 0.0))
        self._ran = {tid: seconds for tid, (seconds, _) in (threads or {}).items()}
        previous, self._ran_at = self._ran_at, t
        if previous is None or t <= previous:
            return None
        return round(min(100.0, 100.0 * ran / (t - previous)), 2)

    def _core_times(self, poll: Poll) -> tuple[float, float] | None:
        _, per_cpu = poll.cpu_times()
        if not 0 <= self.core < len(per_cpu):
            if not self._warned_core:
                self._warned_core = True
                poll.warn(f"{self.name}: core {self.core} is not online ({len(per_cpu)} cores); "
                          "its utilization is not available")
            return None
        return _busy_and_total(per_cpu[self.core])

    def _process_for(self, pid: int) -> psutil.Process | None:
        # psutil.Process is kept across polls: building one reads /proc each time.
        if pid != self._process_pid:
            self._process_pid = pid
            try:
                self._process = psutil.Process(pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                self._process = None
        return self._process
