"""The live data behind the plots: telemetry and step histories in ring buffers (no Qt).

Only the UI thread touches these: samples and events arrive from background
threads into queues, and the UI thread drains them here on its redraw timer.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.state.announcer import Announcer
from app.state.ring_buffer import RingBuffer, ThinningBuffer
from app.state.stored_run import memory_figures
from engine.config import ExperimentConfig
from engine.events import Errored, Finished, Launched, Started, WorkerEvent
from engine.figures.figure import Figure
from engine.figures.run import communication_figure, tensor_memory_figure
from engine.figures.timeline import TIMELINE_STEPS  # steps the timeline shows, here as in exports
from engine.record.efficiency import device_efficiency
from engine.results import Communication, NodeSummary, RunSummary, Step, TensorMemory, Traffic, from_json
from engine.results.efficiency import DeviceEfficiency, Efficiency
from engine.telemetry.smooth import SMOOTH_S, trailing_mean

HISTORY_S = 3600          # one hour of telemetry per device
STEP_POINTS = 8192        # points per step curve, however long the run (a pixel column holds several)


class TelemetryHistory:
    """Per device: utilization (%) and memory used (bytes) over time, newest hour kept.

    Utilization is kept per physical device: a run's "cpu:0" measures core 0's busy
    share, as the idle view's "core 0" does, so both feed one series (``set_physical``).
    Memory stays per device: a CPU virtual device's memory is its own process's.
    """

    def __init__(self, rate_hz: float = 10.0, history_s: float = HISTORY_S, origin: float = 0.0):
        # Room for the driver-buffered GPU samples too, which can come faster than the poll rate.
        self.capacity = max(16, int(rate_hz * history_s * 1.25))
        self.rate_hz = rate_hz
        self.origin = origin  # perf_counter seconds that map to x = 0
        self.util: dict[str, RingBuffer] = {}
        self.mem: dict[str, RingBuffer] = {}
        # A run's CPU device's whole core (DeviceSample.core_util), beside its own work in ``util``.
        self.core: dict[str, RingBuffer] = {}
        # A GPU's SM activity (DeviceSample.sm_active, NVML's GPM), beside its utilization.
        self.sm: dict[str, RingBuffer] = {}
        self.mem_total: dict[str, int] = {}   # per device, all the memory it has (a GPU's; a CPU device: the RAM)
        self.physical: dict[str, str] = {}   # sample device -> the physical device its utilization measures
        self.run_names: dict[str, str] = {}  # physical device -> the current run's names for it
        self.last_t = 0.0

    @property
    def devices(self) -> list[str]:
        """The physical devices sampled (a run's cpu:0 and the idle view's core 0 are one)."""
        return list(dict.fromkeys([*self.util, *(self.physical.get(k, k) for k in self.mem)]))

    def set_physical(self, mapping: dict[str, str]) -> None:
        """A run starts: its devices and what they measure ({"cpu:0": "core 0"})."""
        self.physical = dict(mapping)
        names: dict[str, list[str]] = {}
        for name, core in mapping.items():
            if core != name:
                names.setdefault(core, []).append(name)
        # More CPU virtual devices than cores: one core is several devices' ("core 0 · cpu:0, cpu:2").
        self.run_names = {core: ", ".join(devices) for core, devices in names.items()}

    def end_run(self) -> None:
        """The run ended: the legend names cores alone again (its last samples still map to them)."""
        self.run_names = {}

    def label(self, key: str) -> str:
        """How the legend names a utilization series: "core 0 · cpu:0" while a run uses the core."""
        run_name = self.run_names.get(key)
        return f"{key} · {run_name}" if run_name else key

    def _buffer(self, table: dict[str, RingBuffer], key: str) -> RingBuffer:
        if key not in table:
            table[key] = RingBuffer(self.capacity)
        return table[key]

    def add(self, samples: Iterable[Any]) -> int:
        """Take DeviceSample-like objects (t, device, util, mem_used); returns how many."""
        n = 0
        for s in samples:
            x = s.t - self.origin
            # Only real values go in: a missing metric leaves a gap in time, never a NaN
            # (NaN in a curve costs a finite check per redraw and breaks SVG export).
            if s.util is not None:
                buf = self._buffer(self.util, self.physical.get(s.device, s.device))
                if not len(buf) or buf.last(0) < x:  # a core shared by two devices reads once a pass
                    buf.append(x, float(s.util))
            if getattr(s, "core_util", None) is not None:
                buf = self._buffer(self.core, self.physical.get(s.device, s.device))
                if not len(buf) or buf.last(0) < x:
                    buf.append(x, float(s.core_util))
            if getattr(s, "sm_active", None) is not None:
                self._buffer(self.sm, s.device).append(x, float(s.sm_active))
            if s.mem_used is not None:
                self._buffer(self.mem, s.device).append(x, float(s.mem_used))
                if getattr(s, "mem_total", None):
                    self.mem_total[s.device] = s.mem_total
            self.last_t = max(self.last_t, x)
            n += 1
        return n

    def clear(self) -> None:
        for buf in (*self.util.values(), *self.mem.values(), *self.core.values(), *self.sm.values()):
            buf.clear()
        self.util.clear()
        self.mem.clear()
        self.core.clear()
        self.sm.clear()


class TrailingMeans:
    """A utilization buffer's one-second means (engine.telemetry.smooth), extended as samples come.

    Recomputing an hour of samples for 8 devices took 9 ms of each redraw; a mean
    depends only on the samples before it, so only the new samples' means are computed.
    """

    def __init__(self, window_s: float = SMOOTH_S):
        self.window_s = window_s
        self._x = np.empty(0)
        self._means = np.empty(0)

    def of(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The means of the buffer's columns ``x`` (ascending) and ``y``."""
        if not len(x):
            self._x, self._means = np.empty(0), np.empty(0)
            return self._means
        # The cached samples still in the buffer: from its first sample on (older ones fell off its start).
        kept = int(np.searchsorted(self._x, x[0])) if len(self._x) else 0
        known = len(self._x) - kept
        if known <= 0 or known > len(x) or self._x[kept] != x[0] or self._x[-1] != x[known - 1]:
            means = trailing_mean(x, y, self.window_s)  # a new series, or one that changed: all of it
        else:
            # New samples' windows reach back at most window_s: start there, keep the tail.
            start = int(np.searchsorted(x, x[known] - self.window_s, side="right")) if known < len(x) else known
            tail = trailing_mean(x[start:], y[start:], self.window_s)[known - start:]
            means = np.concatenate((self._means[kept:], tail))
        self._x, self._means = np.array(x), means
        return means


@dataclass
class RunProgress:
    """What the progress bar, status line and timeline need about the current run."""
    run_id: str | None = None
    label: str | None = None      # how the plots name it: "run 182558", "schedules: run 2 of 3, gpipe"
    config: ExperimentConfig = field(default_factory=ExperimentConfig)
    devices: list[str] = field(default_factory=list)
    micro_batches: int = 1
    split: list[int] | None = None
    theory: float | None = None    # the worker's theoretical bubble (its `started` event), None where none holds
    theory_text: str | None = None  # its formula with the values (engine.record.summary.theory_formula)
    notes: list[str] = field(default_factory=list)  # what to know to read the run (`started`, then the summary)
    steps_total: int = 0
    steps_done: int = 0
    step_times: deque = field(default_factory=lambda: deque(maxlen=20))
    step_samples: deque = field(default_factory=lambda: deque(maxlen=20))   # (seconds, samples) of those steps
    busy: dict[str, float] = field(default_factory=dict)
    bubble_history: deque = field(default_factory=lambda: deque(maxlen=TIMELINE_STEPS))
    error: Errored | None = None   # the worker's error
    summary: RunSummary | None = None
    status: str = "idle"
    launched: bool = False         # the worker's `launched`: its rank processes exist and build the model
    nodes: list[NodeSummary] = field(default_factory=list)  # a run over several machines (RunSummary.nodes)
    tensor_memory: dict[str, TensorMemory] = field(default_factory=dict)   # per device, as last reported
    communication: dict[str, Communication] = field(default_factory=dict)  # per device, the last step's
    peaks: dict[str, dict] = field(default_factory=dict)   # per device, its peak FLOP/s (the `started` event)
    efficiency: dict[str, DeviceEfficiency] = field(default_factory=dict)  # per device, once its FLOPs are counted
    # Each event once applied (the live view draws what it changed: app/views/center_area.py).
    applied: Announcer = field(default_factory=Announcer, repr=False, compare=False)

    def apply(self, event: WorkerEvent) -> None:
        """A worker event (engine.events) changes what is known about the run, and ``applied`` announces it;
        no Qt, no drawing."""
        self._take(event)
        self.applied.announce(event)

    def _take(self, event: WorkerEvent) -> None:
        match event:
            case Launched():
                self.launched = True
                self.nodes = list(event.nodes or self.nodes)
            case Started():
                self.launched = True
                self.status = "running"
                self.nodes = list(event.nodes or self.nodes)
                # Each physical device once: two stages sharing a GPU are one device's work.
                self.devices = list(dict.fromkeys(d.name for d in event.devices))
                self.theory = event.theory_bubble
                self.theory_text = event.theory_text
                self.notes = list(event.notes)
                self.split = event.split or self.split
                self.micro_batches = event.micro_batches or self.micro_batches
                self.peaks = dict(event.peaks)
            case Step():
                self.steps_done = event.step + 1
                for device, flops in (event.flops or {}).items():
                    self.efficiency[device] = device_efficiency(device, flops, self.peaks, self.config.peak)
                if event.time_s is not None:
                    self.step_times.append(event.time_s)
                    if event.samples is not None:
                        self.step_samples.append((event.time_s, event.samples))
                for device, kinds in (event.tensor_memory or {}).items():
                    self.tensor_memory[device] = from_json(TensorMemory, kinds) or TensorMemory()
                for device, operations in (event.communication or {}).items():
                    traffic = [Traffic(op, *values) for op, values in operations.items() if len(values) == 3]
                    self.communication[device] = Communication(traffic)
                if event.busy:
                    self.busy = dict(event.busy)
                    self.bubble_history.append(1.0 - sum(self.busy.values()) / len(self.busy))
            case Errored():
                self.error = event
            case Finished():
                self.summary = event.summary

    def step_mfu(self, step: Step) -> dict[str, float]:
        """Each device's MFU in this step, once its FLOPs are counted (DeviceEfficiency.step_mfu)."""
        order = [*self.devices, *(d for d in self.efficiency if d not in self.devices)]   # the legend's order
        shares = {device: self.efficiency[device].step_mfu(step.time_s) for device in order
                  if device in self.efficiency}
        return {device: share for device, share in shares.items() if share is not None}

    def node_lines(self) -> list[str]:
        """Each node of a run over several machines: "node1 10.0.0.3:29400 (gpu-07): ranks 2-3, clock +1.2 ms"."""
        if self.summary and self.summary.nodes:
            return node_lines(self.summary)
        return [node.text() for node in self.nodes]

    def tensor_lines(self) -> list[str]:
        """What the run's tensors hold per device: the summary's peaks once it ended, the last step's before."""
        if self.summary and self.summary.tensor_memory:
            return tensor_lines(self.summary)
        return _tensor_lines(self.tensor_memory.items())

    def memory_figures(self) -> tuple[Figure, Figure]:
        """Tensor memory and communication per device: the summary's once the run ended, the last step's before."""
        s = self.summary
        if s is not None and (s.tensor_memory or s.communication):
            return memory_figures(s)
        devices = self.devices or list(self.tensor_memory)
        return (tensor_memory_figure(devices, [self.tensor_memory.get(d) for d in devices]),
                communication_figure(devices, [self.communication.get(d) for d in devices]))

    def throughput(self) -> float | None:
        """Samples over time across the last steps (engine/record/totals.py throughput_summary's measure: a mean
        of each step's rate weighs a fast step as much as a slow one); None before a step's samples are known."""
        seconds = sum(t for t, _ in self.step_samples)
        return sum(n for _, n in self.step_samples) / seconds if seconds > 0 else None

    def time_left_s(self) -> float | None:
        """Seconds left at the mean step so far; None before a step, or for a run with no set end (a watched
        script that ends by itself: steps_total 0)."""
        if not self.steps_total:
            return None
        if not self.step_times or self.steps_total <= self.steps_done:
            return None if self.steps_total > self.steps_done else 0.0
        mean = sum(self.step_times) / len(self.step_times)
        return mean * (self.steps_total - self.steps_done)

    def measured_bubble(self) -> float | None:
        if self.summary and self.summary.bubble.measured is not None:
            return self.summary.bubble.measured
        if not self.bubble_history:
            return None
        return sum(self.bubble_history) / len(self.bubble_history)

    def theory_formula(self) -> str | None:
        """The formula behind ``theory_bubble``, with its values (engine.record.summary.theory_formula)."""
        return self.summary.bubble.formula if self.summary else self.theory_text

    def theory_bubble(self) -> float | None:
        """The engine's figure (engine.record.summary.theoretical_bubble): from the summary once the run ends,
        from the `started` event while it runs."""
        return self.summary.bubble.theory if self.summary else self.theory


class StepHistory:
    """Throughput and loss per step over the whole run in bounded memory (ThinningBuffer), and the
    intervals of the last few steps."""

    def __init__(self, capacity: int = STEP_POINTS):
        self.capacity = max(2, int(capacity))
        self.throughput = ThinningBuffer(self.capacity)
        self.loss = ThinningBuffer(self.capacity)
        self.mfu: dict[str, ThinningBuffer] = {}   # per device, percent (RunProgress.step_mfu)
        self.times = ThinningBuffer(self.capacity)   # each step's seconds: a watched run's MFU once it ends
        self.timeline: deque[tuple[int, dict]] = deque(maxlen=TIMELINE_STEPS)
        self.timeline_version = 0

    def add(self, event: Step, mfu: dict[str, float] | None = None) -> None:
        step = float(event.step)
        if event.throughput is not None:
            self.throughput.append(step, event.throughput)
        if event.loss is not None:
            self.loss.append(step, event.loss)
        if event.time_s is not None:
            self.times.append(step, event.time_s)
        for device, share in (mfu or {}).items():
            self.mfu.setdefault(device, ThinningBuffer(self.capacity)).append(step, share * 100)
        if event.intervals:
            self.timeline.append((event.step, event.intervals))
            self.timeline_version += 1

    def fill_mfu(self, efficiency: Efficiency | None) -> bool:
        """A run whose peaks came only with its summary (a watched script's: its dtype is known once it ran):
        each device's MFU at every step drawn so far, from the summary's counted FLOPs (none over 100 %:
        DeviceEfficiency.step_mfu). Whether curves were added (none where the live steps had them already)."""
        if self.mfu or efficiency is None:
            return False
        steps, times = self.times.column(0), self.times.column(1)
        for d in efficiency.devices:
            shares = [(step, d.step_mfu(float(t))) for step, t in zip(steps, times, strict=True)]
            kept = [(step, share) for step, share in shares if share is not None]
            if kept:
                buffer = self.mfu.setdefault(d.device, ThinningBuffer(self.capacity))
                for step, share in kept:
                    buffer.append(float(step), share * 100)
        return bool(self.mfu)


def tensor_lines(summary: RunSummary) -> list[str]:
    """"tensors cpu:0: 2.78 MiB (params 1.01, ...)" per device of a finished run (its most over the steps)."""
    return _tensor_lines(zip(summary.devices, summary.tensor_memory or [], strict=False))


def _tensor_lines(by_device) -> list[str]:
    return [f"tensors {device}: {memory.text()}" for device, memory in by_device if memory is not None]


def physical_names(config: ExperimentConfig) -> dict[str, str]:
    """A run's devices and the physical devices their utilization measures (torch-free: engine.devices)."""
    from engine.cores import usable_cores
    from engine.devices import DeviceError
    from engine.run.loader_placement import LOADER_SERIES, sampled_cores
    from engine.run.resolved_run import run_devices
    from engine.telemetry.targets import physical_name
    try:
        devices = run_devices(config)
    except (DeviceError, ValueError):  # the run fails to start and says why; nothing to map
        return {}
    # a DataLoader's workers' own cores are sampled as the loader's (engine/run/session.py): the core's series
    loader = {LOADER_SERIES.format(core): f"core {core}" for core in sampled_cores(config, devices, usable_cores())}
    return {**{d.name: physical_name(d) for d in devices}, **loader}


def node_lines(summary: RunSummary) -> list[str]:
    """A finished run's nodes from its summary, one line each (NodeSummary.text); none for a run on one machine."""
    return [node.text() for node in summary.nodes or []]
