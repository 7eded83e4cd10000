"""CpuTarget: a CPU virtual device, seen as the OS sees its core and its process.

Utilization is the busy share of the pinned core between two polls, from the
kernel's per-CPU tick counters (/proc/stat through psutil), as top's per-CPU
view computes it. Memory is the RSS of the process running on the device.
"""
from __future__ import annotations

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

    def __init__(self, name: str, core: int, pid: int | None = None):
        self.name = name
        self.core = core
        self.pid = pid  # the sampler's set_pid changes it while running
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
        return [DeviceSample(t=t, device=self.name, util=util, mem_used=mem_used, mem_total=self._mem_total)]

    def read_memory(self, poll: Poll) -> list[DeviceSample]:
        """The process's RSS alone (no utilization: that spans a whole period between passes); none without a
        pid or once it exited."""
        pid = self.pid
        mem_used = None if pid is None else poll.rss(pid, self._process_for(pid))
        if mem_used is None:
            return []
        t, _ = poll.cpu_times()
        return [DeviceSample(t=t, device=self.name, util=None, mem_used=mem_used, mem_total=self._mem_total)]

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
