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

# Kinds of interval, in a step's order, and what each means (the timeline's legend and
# the README read this). "data-wait" and "wait" are recorded but not busy.
KIND_MEANING = {
    "data": "loading the batch in the rank's own process: drawing it inside the step (--input-prep in-step), or a "
            "DataLoader without workers decoding it (--input-prep loader, a watched script's num_workers=0)",
    "data-wait": "waiting for a DataLoader's worker processes to hand over the next batch (--loader-workers, a "
                 "watched script's num_workers > 0): the device idles meanwhile (not busy)",
    "forward": "a stage's or replica's forward pass, the loss included",
    "backward": "a backward pass: gradients of this device's part of the model",
    "backward-input": "a zero-bubble schedule's first half of a backward: the gradient of the stage's input, "
                      "which the stage before waits for",
    "backward-weight": "a zero-bubble schedule's second half of a backward: the gradients of the stage's "
                       "weights, run later to fill the bubble",
    "transfer": "copying activations, gradients, inputs or parameters between devices",
    "communication": "a collective between processes (ddp's gradient all-reduce) or data-parallel's "
                     "reduce of gradients to device 0, from when every peer has arrived",
    "optimizer": "the optimizer's update of this device's parameters",
    "wait": "blocked on a peer: its activation or gradient, or its arrival at a collective (not busy)",
    "eval": "a watched script's evaluation: its model called without gradients between its steps, in no step's "
            "time (engine/watch/instruments.py)",
}
BUSY_KINDS = ("data", "forward", "backward", "backward-input", "backward-weight", "transfer", "communication",
              "optimizer")
WAIT_KINDS = ("data-wait", "wait")   # timed, but the device idles through them (drawn as thin bands)
KINDS = BUSY_KINDS + WAIT_KINDS + ("eval",)


_open_spans = threading.local()   # per thread: the devices of the spans it is inside, innermost last


def span_device() -> str | None:
    """The device of the innermost span this thread is timing (``StepTimer.span``), or None outside any."""
    stack = getattr(_open_spans, "devices", None)
    return stack[-1] if stack else None


class StepTimer:
    """Collects (kind, t0, t1) intervals per device for one step at a time. Thread-safe."""

    def __init__(self, cuda_indices=()):
        self._lock = threading.Lock()
        self._intervals: dict[str, list[list]] = {}
        self._blocking: dict[str, list[list]] = {}
        self._cuda_pending: list[tuple[str, str, object, object]] = []
        self._cuda_anchor: dict[int, tuple[float, object]] = {}
        self.cuda_indices = tuple(cuda_indices)  # the GPUs this process works on
        self.step_start = 0.0

    def begin_step(self) -> None:
        with self._lock:
            self._intervals = {}
            self._blocking = {}
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

    def add_blocking(self, device: str, kind: str, t0: float, t1: float) -> None:
        """An interval in which the calling thread did nothing else (a collective it waited for on a CPU
        device): ``end_step`` cuts it out of the forward or backward span around it."""
        with self._lock:
            self._blocking.setdefault(device, []).append([kind, t0, t1])

    def mark(self, device):
        """A point in ``device``'s time: now on a CPU device; on a GPU an event recorded on the calling
        thread's current stream (when the GPU gets there). ``between`` turns two marks into an interval."""
        if getattr(device, "kind", "cpu") != "cuda":
            return time.perf_counter()
        import torch
        with torch.cuda.device(device.index):
            self._ensure_anchor(device.index)
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        return event

    def between(self, device, kind: str, start, end) -> None:
        """Record ``kind`` on ``device`` from mark ``start`` to mark ``end``. Any thread."""
        if getattr(device, "kind", "cpu") != "cuda":
            self.add(getattr(device, "name", device), kind, start, end)
            return
        with self._lock:
            self._cuda_pending.append((device.name, kind, device.index, (start, end)))

    def _ensure_anchor(self, index: int) -> None:
        import torch
        with self._lock:
            if index in self._cuda_anchor:
                return
            anchor = torch.cuda.Event(enable_timing=True)
            anchor.record()
            self._cuda_anchor[index] = (time.perf_counter(), anchor)

    @contextmanager
    def span(self, device, kind: str):
        """Time the block as ``kind`` on ``device`` (an engine Device or a name); meanwhile ``span_device()``
        on this thread names it (the FLOP counter credits the block's work to it: engine.measure.flops)."""
        start = self.mark(device)
        stack = _open_spans.__dict__.setdefault("devices", [])
        stack.append(getattr(device, "name", device))
        try:
            yield
        finally:
            stack.pop()
            self.between(device, kind, start, self.mark(device))

    def end_step(self) -> dict[str, list[list]]:
        """The step's intervals per device (absolute perf_counter seconds)."""
        with self._lock:
            pending, self._cuda_pending = self._cuda_pending, []
        if pending:
            import torch
            for index in self._cuda_anchor:  # every GPU used, not only the current one
                torch.cuda.synchronize(index)
            for name, kind, index, (start, end) in pending:
                host0, anchor = self._cuda_anchor[index]
                t0 = host0 + anchor.elapsed_time(start) / 1000.0
                self.add(name, kind, t0, t0 + max(0.0, start.elapsed_time(end)) / 1000.0)
        with self._lock:
            out, self._intervals = self._intervals, {}
            blocking, self._blocking = self._blocking, {}
        for device, spans in blocking.items():
            out[device] = carve(out.get(device, []), spans) + spans
        return out


def carve(intervals: list[list], cuts: list[list]) -> list[list]:
    """``intervals`` less the time ``cuts`` cover: a span around a cut becomes its pieces either side."""
    for _, c0, c1 in cuts:
        intervals = [[kind, a, b] for kind, t0, t1 in intervals
                     for a, b in ((t0, min(t1, c0)), (max(t0, c1), t1)) if b > a]
    return intervals


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
