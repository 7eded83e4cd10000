"""The live data behind the plots: telemetry and step histories in ring buffers (no Qt).

Only the UI thread touches these: samples and events arrive from background
threads into queues, and the UI thread drains them here on its redraw timer.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

from app.ring_buffer import RingBuffer

HISTORY_S = 3600          # one hour of telemetry per device
TIMELINE_STEPS = 3        # steps the timeline shows


class TelemetryHistory:
    """Per device: utilization (%) and memory used (bytes) over time, newest hour kept."""

    def __init__(self, rate_hz: float = 10.0, history_s: float = HISTORY_S, origin: float = 0.0):
        # Room for the driver-buffered GPU samples too, which can come faster than the poll rate.
        self.capacity = max(16, int(rate_hz * history_s * 1.25))
        self.origin = origin  # perf_counter seconds that map to x = 0
        self.util: dict[str, RingBuffer] = {}
        self.mem: dict[str, RingBuffer] = {}
        self.mem_total: dict[str, int] = {}
        self.devices: list[str] = []
        self.last_t = 0.0

    def _buffers(self, device: str) -> tuple[RingBuffer, RingBuffer]:
        if device not in self.util:
            self.util[device] = RingBuffer(self.capacity)
            self.mem[device] = RingBuffer(self.capacity)
            self.devices.append(device)
        return self.util[device], self.mem[device]

    def add(self, samples: Iterable[Any]) -> int:
        """Take DeviceSample-like objects (t, device, util, mem_used, mem_total); returns how many."""
        n = 0
        for s in samples:
            util, mem = self._buffers(s.device)
            x = s.t - self.origin
            # Only real values go in: a missing metric leaves a gap in time, never a NaN
            # (NaN in a curve costs a finite check per redraw and breaks SVG export).
            if s.util is not None:
                util.append(x, float(s.util))
            if s.mem_used is not None:
                mem.append(x, float(s.mem_used))
            if getattr(s, "mem_total", None):
                self.mem_total[s.device] = int(s.mem_total)
            self.last_t = max(self.last_t, x)
            n += 1
        return n

    def clear(self) -> None:
        for buf in (*self.util.values(), *self.mem.values()):
            buf.clear()
        self.util.clear()
        self.mem.clear()
        self.devices.clear()


@dataclass
class RunProgress:
    """What the progress bar, status line and timeline need about the current run."""
    run_id: str | None = None
    label: str | None = None      # how the plots name it: "run 182558", "schedules: run 2 of 3, gpipe"
    config: dict = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    micro_batches: int = 1
    split: list[int] | None = None
    theory: float | None = None    # the worker's theoretical bubble (its `started` event), None where none holds
    notes: list[str] = field(default_factory=list)  # what to know to read the run (`started`, then the summary)
    steps_total: int = 0
    steps_done: int = 0
    last_step_time_s: float | None = None
    step_times: deque = field(default_factory=lambda: deque(maxlen=20))
    busy: dict[str, float] = field(default_factory=dict)
    bubble_history: deque = field(default_factory=lambda: deque(maxlen=TIMELINE_STEPS))
    warnings: list[str] = field(default_factory=list)
    error: dict | None = None
    summary: dict | None = None
    status: str = "idle"

    def time_left_s(self) -> float | None:
        if not self.step_times or self.steps_total <= self.steps_done:
            return None if self.steps_total > self.steps_done else 0.0
        mean = sum(self.step_times) / len(self.step_times)
        return mean * (self.steps_total - self.steps_done)

    def measured_bubble(self) -> float | None:
        if self.summary and isinstance(self.summary.get("bubble"), dict) \
                and self.summary["bubble"].get("measured") is not None:
            return float(self.summary["bubble"]["measured"])
        if not self.bubble_history:
            return None
        return sum(self.bubble_history) / len(self.bubble_history)

    def theory_bubble(self) -> float | None:
        """The engine's figure (engine.summary.theoretical_bubble): from the summary once the run ends,
        from the `started` event while it runs."""
        if self.summary and isinstance(self.summary.get("bubble"), dict) and "theory" in self.summary["bubble"]:
            value = self.summary["bubble"]["theory"]
            return None if value is None else float(value)
        return self.theory


class StepHistory:
    """Throughput and loss per step, and the intervals of the last few steps."""

    def __init__(self, capacity: int = 1000):
        self.capacity = max(1, int(capacity))
        self.throughput = RingBuffer(self.capacity)
        self.loss = RingBuffer(self.capacity)
        self.step_time = RingBuffer(self.capacity)
        self.timeline: deque[tuple[int, dict]] = deque(maxlen=TIMELINE_STEPS)
        self.timeline_version = 0

    def add(self, event: dict) -> None:
        step = float(event.get("step", len(self.throughput)))
        if event.get("throughput") is not None:
            self.throughput.append(step, float(event["throughput"]))
        if event.get("loss") is not None:
            self.loss.append(step, float(event["loss"]))
        if event.get("time_s") is not None:
            self.step_time.append(step, float(event["time_s"]))
        if event.get("intervals"):
            self.timeline.append((int(step), event["intervals"]))
            self.timeline_version += 1
