"""Busy intervals per device: perf_counter on CPU devices, CUDA events on GPUs.

Every process of a run uses ``time.perf_counter()``, which on Linux reads
CLOCK_MONOTONIC, so intervals from different ranks share one clock. GPU work is
asynchronous: its intervals come from CUDA events, placed on the host clock
through an event recorded at the start of the step.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

# Kinds of interval, in a step's order. "data" is drawing the batch, timed only on a CPU
# device (the core does that work; a GPU is idle meanwhile). "wait" is time blocked on a
# peer: recorded, but not busy.
BUSY_KINDS = ("data", "forward", "backward", "transfer", "optimizer")
KINDS = BUSY_KINDS + ("wait",)


class StepTimer:
    """Collects (kind, t0, t1) intervals per device for one step at a time. Thread-safe."""

    def __init__(self, cuda_indices=()):
        self._lock = threading.Lock()
        self._intervals: dict[str, list[list]] = {}
        self._cuda_pending: list[tuple[str, str, object, object]] = []
        self._cuda_anchor: dict[int, tuple[float, object]] = {}
        self.cuda_indices = tuple(cuda_indices)  # the GPUs this process works on
        self.step_start = 0.0

    def begin_step(self) -> None:
        with self._lock:
            self._intervals = {}
            self._cuda_pending = []
            self._cuda_anchor = {}
        if self.cuda_indices:
            self._anchor_idle_gpus()
        self.step_start = time.perf_counter()

    def _anchor_idle_gpus(self) -> None:
        """Pair the host clock with an event on each GPU while the GPU is idle.

        An anchor recorded behind queued work (a pipeline rank's first span comes after
        a wait for its peer's activation) would fire late and shift the whole step's
        intervals earlier.
        """
        import torch
        for index in self.cuda_indices:
            with torch.cuda.device(index):
                torch.cuda.synchronize()
                anchor = torch.cuda.Event(enable_timing=True)
                anchor.record()
                self._cuda_anchor[index] = (time.perf_counter(), anchor)

    def add(self, device: str, kind: str, t0: float, t1: float) -> None:
        with self._lock:
            self._intervals.setdefault(device, []).append([kind, t0, t1])

    @contextmanager
    def span(self, device, kind: str):
        """Time the block as ``kind`` on ``device`` (an engine Device or a name)."""
        name = getattr(device, "name", device)
        if getattr(device, "kind", "cpu") == "cuda":
            with self._cuda_span(device, kind):
                yield
            return
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, kind, t0, time.perf_counter())

    @contextmanager
    def _cuda_span(self, device, kind: str):
        import torch
        index = device.index
        with torch.cuda.device(index):
            if index not in self._cuda_anchor:
                anchor = torch.cuda.Event(enable_timing=True)
                anchor.record()
                self._cuda_anchor[index] = (time.perf_counter(), anchor)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                yield
            finally:
                end.record()
                with self._lock:
                    self._cuda_pending.append((device.name, kind, index, (start, end)))

    def end_step(self) -> dict[str, list[list]]:
        """The step's intervals per device (absolute perf_counter seconds)."""
        if self._cuda_pending:
            import torch
            for index in self._cuda_anchor:  # every GPU used, not only the current one
                torch.cuda.synchronize(index)
            for name, kind, index, (start, end) in self._cuda_pending:
                host0, anchor = self._cuda_anchor[index]
                t0 = host0 + anchor.elapsed_time(start) / 1000.0
                self.add(name, kind, t0, t0 + start.elapsed_time(end) / 1000.0)
        with self._lock:
            out, self._intervals = self._intervals, {}
        return out


def busy_time(intervals: list[list]) -> float:
    """Seconds covered by busy intervals (overlaps counted once)."""
    spans = sorted((t0, t1) for kind, t0, t1 in intervals if kind in BUSY_KINDS)
    total, cur0, cur1 = 0.0, None, None
    for t0, t1 in spans:
        if cur1 is None or t0 > cur1:
            if cur1 is not None:
                total += cur1 - cur0
            cur0, cur1 = t0, t1
        else:
            cur1 = max(cur1, t1)
    if cur1 is not None:
        total += cur1 - cur0
    return total
