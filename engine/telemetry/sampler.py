"""TelemetrySampler: the named background thread that polls every target at a fixed rate.

It runs in the process that shows telemetry (GUI or CLI), not in the worker,
so the curves stay true when the worker hangs. One pass reads every target;
passes are scheduled on absolute deadlines so jitter does not lower the rate.
Nothing a target does can end the thread: errors become one warning each.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from engine.telemetry.cpu_target import CpuTarget
from engine.telemetry.poll import Poll
from engine.telemetry.sample import DeviceSample
from engine.telemetry.targets import Target

DEFAULT_RATE_HZ = 10.0
MAX_RATE_HZ = 50.0
# Unread samples kept when nobody drains (an idle view that only uses the
# callback); at 10 Hz that is over an hour of 16 devices. Oldest go first.
MAX_PENDING = 600_000

log = logging.getLogger("splitscope.telemetry")


def check_rate(rate_hz: float) -> float:
    """The rate as a float, or ValueError naming the option and what it allows."""
    try:
        rate = float(rate_hz)
    except (TypeError, ValueError):
        rate = math.nan
    if not 0 < rate <= MAX_RATE_HZ:  # also refuses NaN
        raise ValueError(f"--telemetry-hz: {rate_hz!r} is not allowed; "
                         f"allowed: a rate above 0 and at most {MAX_RATE_HZ:g} samples per second "
                         f"(default {DEFAULT_RATE_HZ:g})")
    return rate


class TelemetrySampler(threading.Thread):
    """Samples ``targets`` ``rate_hz`` times a second until ``stop()``.

    New samples collect in a buffer that ``drain()`` empties, and are also
    passed to ``on_samples(list)`` from the sampler thread after each pass.
    Warnings (a lost GPU, a failing target) go to ``on_warning(str)``, or the
    "splitscope.telemetry" logger, once each, and stay in ``warnings``.
    """

    def __init__(self, targets: Iterable[Target], rate_hz: float = DEFAULT_RATE_HZ,
                 on_samples: Callable[[list[DeviceSample]], None] | None = None, *,
                 on_warning: Callable[[str], None] | None = None, max_pending: int = MAX_PENDING):
        super().__init__(name="telemetry-sampler", daemon=True)
        self.rate_hz = check_rate(rate_hz)
        self.targets: list[Target] = list(targets)
        names = [target.name for target in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"telemetry targets need distinct names, got {names}")
        self._on_samples = on_samples
        self._on_warning = on_warning
        self._pending: deque[DeviceSample] = deque(maxlen=max_pending)
        self._pending_lock = threading.Lock()
        self._stop_event = threading.Event()
        self._memory_due = threading.Event()  # set_pid: read the new processes' memory now, not a period later
        self._opened = False
        self._close_lock = threading.Lock()
        self._warned: set[str] = set()
        self.warnings: list[str] = []
        self.cpu_time_s = 0.0
        """CPU seconds the sampler thread has used (``time.thread_time``): its own cost."""
        self.passes = 0

    # -- the consumer's side -------------------------------------------------

    def drain(self) -> list[DeviceSample]:
        """The samples taken since the last drain, oldest first; empties the buffer."""
        with self._pending_lock:
            samples = list(self._pending)
            self._pending.clear()
        return samples

    def set_pid(self, name: str, pid: int | None) -> None:
        """Report the RSS of ``pid`` on CPU target ``name``: at once (a memory-only sample, out of the passes'
        schedule: a rank forked warm may be done in a tenth of a second), then every pass.

        A GPU target ignores it: its memory is the device's, whoever uses it.
        """
        for target in self.targets:
            if target.name == name:
                if isinstance(target, CpuTarget):
                    target.pid = pid  # one attribute store: atomic for the sampler thread
                    self._memory_due.set()
                return
        names = [t.name for t in self.targets]
        raise ValueError(f"no telemetry target named {name!r}; targets: {names}")

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread within one pass and wait for it (at most ``timeout`` s); the targets give back what
        they hold (GPM's sample buffers)."""
        self._stop_event.set()
        self._memory_due.set()
        if self.is_alive():
            self.join(timeout)
        if not self.is_alive():  # a thread still in a pass (a stalled driver) closes them as it ends
            self._close()

    # -- the sampler thread --------------------------------------------------

    def run(self) -> None:
        try:
            self._poll_until_stopped()
        finally:
            self._close()

    def _poll_until_stopped(self) -> None:
        period = 1.0 / self.rate_hz
        if not self._opened:
            self._open()
        # First pass one period after the baseline, so CPU deltas span a full period.
        deadline = time.perf_counter() + period
        while True:
            memory_due = self._memory_due.wait(max(0.0, deadline - time.perf_counter()))
            if self._stop_event.is_set():
                return
            if memory_due:
                self._memory_due.clear()
                self._read_memory()  # the passes keep their schedule: utilization spans whole periods
                continue
            self.poll_once()
            self.cpu_time_s = time.thread_time()
            deadline += period
            if time.perf_counter() - deadline > period:
                # More than a pass behind (a stalled driver, a suspended laptop):
                # skip the missed passes instead of firing them back to back.
                deadline = time.perf_counter() + period

    def poll_once(self) -> list[DeviceSample]:
        """Read every target once, store and publish the samples, return them.

        The thread calls this each period; tests and one-off reads call it
        directly on a sampler that was not started (targets keep per-poll state,
        so never both at once).
        """
        if not self._opened:
            self._open()
        poll = Poll(warn=self._warn)
        samples: list[DeviceSample] = []
        for target in self.targets:
            try:
                samples.extend(target.read(poll))
            except Exception as exc:  # a target bug must not end the sampling of the others
                self._warn(f"{target.name}: telemetry read failed: {type(exc).__name__}: {exc}",
                           key=f"read:{target.name}:{type(exc).__name__}")
        self.passes += 1
        self._publish(samples)
        return samples

    def _read_memory(self) -> None:
        poll = Poll(warn=self._warn)
        samples: list[DeviceSample] = []
        for target in self.targets:
            if isinstance(target, CpuTarget):
                try:
                    samples.extend(target.read_memory(poll))
                except Exception as exc:
                    self._warn(f"{target.name}: telemetry read failed: {type(exc).__name__}: {exc}",
                               key=f"read:{target.name}:{type(exc).__name__}")
        self._publish(samples)

    def _open(self) -> None:
        self._opened = True
        poll = Poll(warn=self._warn)
        for target in self.targets:
            try:
                target.open(poll)
            except Exception as exc:
                self._warn(f"{target.name}: telemetry start failed: {type(exc).__name__}: {exc}",
                           key=f"open:{target.name}")

    def _close(self) -> None:
        with self._close_lock:  # stop() and the thread's end may both get here
            if not self._opened:
                return
            self._opened = False
            for target in self.targets:
                try:
                    target.close()
                except Exception as exc:
                    self._warn(f"{target.name}: telemetry close failed: {type(exc).__name__}: {exc}",
                               key=f"close:{target.name}")

    def _publish(self, samples: list[DeviceSample]) -> None:
        if not samples:
            return
        with self._pending_lock:
            overflow = len(self._pending) + len(samples) > (self._pending.maxlen or math.inf)
            self._pending.extend(samples)
        if overflow:  # warned outside the lock: the callback may well call drain()
            self._warn(f"telemetry: more than {self._pending.maxlen} samples not drained; "
                       "dropping the oldest", key="overflow")
        if self._on_samples is not None:
            try:
                self._on_samples(samples)
            except Exception as exc:
                self._warn(f"telemetry: the on_samples callback failed: {type(exc).__name__}: {exc}",
                           key="on_samples")

    def _warn(self, message: str, key: str | None = None) -> None:
        # Once per key: a failure that repeats every 100 ms is still one warning.
        key = key or message
        if key in self._warned:
            return
        self._warned.add(key)
        self.warnings.append(message)
        if self._on_warning is None:
            log.warning(message)
            return
        try:
            self._on_warning(message)
        except Exception:
            log.exception("telemetry: the on_warning callback failed")
