"""What a run and an experiment produce, typed (docs/summary.md).

Everything past the protocol and the store reads these attributes; JSON exists
only at those two boundaries (``to_json``, ``from_json``). ``from_json`` takes
what any version of Splitscope stored: a field it does not know is ignored, a
field it lacks takes its default, and a nested value of another shape (an older
run's ``batch_split``) is dropped rather than failing a whole history.
"""
from __future__ import annotations

import dataclasses
import statistics
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engine.efficiency import Efficiency  # the efficiency section: its own module's types
from engine.script_results import Finding, ScriptFacts, TraceSource  # what was read (a script, traces); findings
from engine.telemetry.sample import DeviceSample
from engine.telemetry.summary import TelemetrySummary  # the telemetry section: its own layer's type

T = TypeVar("T")


# ---- JSON at the boundaries ----------------------------------------------------------------
def from_json(cls: type[T], data: Any) -> T | None:
    """``cls`` from parsed JSON; None when ``data`` is not an object or lacks a field ``cls`` cannot do without.

    A value of the wrong kind (null where a list belongs, text where a number does) is
    treated as missing: the field takes its default, or is None where None is allowed.
    """
    if not isinstance(data, dict):
        return None
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = _value(hints[f.name], data[f.name])
        if value is not None or _allows_none(hints[f.name]):
            kwargs[f.name] = value
    try:
        return cls(**kwargs)
    except TypeError:  # a required field missing or unreadable: the whole object is
        return None


def to_json(value) -> Any:
    """A result as plain JSON values (lists, dicts, numbers, strings)."""
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _allows_none(hint) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _value(hint, value):
    """``value`` as ``hint`` says, or None when it is not of that kind."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _value(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value)
    if origin is list:
        if not isinstance(value, list):
            return None
        (item,) = typing.get_args(hint) or (Any,)
        converted = [_value(item, v) for v in value]
        # An object of another shape is dropped; None in a list of numbers is data ("no samples").
        return [c for c in converted if c is not None] if dataclasses.is_dataclass(item) else converted
    if origin is dict:
        return value if isinstance(value, dict) else None
    if hint in (int, float):
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if hint is str:
        return value if isinstance(value, str) else None
    return value


# ---- a run --------------------------------------------------------------------------------
@dataclass(frozen=True)
class MeanStd:
    mean: float
    std: float = 0.0


@dataclass(frozen=True)
class Loss:
    first: float | None = None
    last: float | None = None


@dataclass(frozen=True)
class Bubble:
    measured: float | None = None   # 1 - mean(devices_busy)
    theory: float | None = None     # (p-1)/(m+p-1), or (p-1)/(V*m+p-1) interleaved, where a formula holds
    formula: str | None = None      # that formula with its values (engine.record.summary.theory_formula)


@dataclass(frozen=True)
class BatchSplit:
    split: list[int]                # samples per replica
    steps: int = 0                  # how many steps split the batch so


@dataclass(frozen=True)
class TensorMemory:
    """Bytes of a device's tensors by kind (engine/measure/tensor_memory.py): the most over the measured steps."""
    params: int = 0
    grads: int = 0
    optimizer: int = 0
    activations: int = 0
    allocated_peak: int | None = None    # GPUs: torch's allocator, every tensor at its most
    step_peak: dict[str, int] | None = None
    """fsdp: the tensors live at the peak of its last warm-up step, by torch's FSDPMemTracker's kinds
    ("Sharded Param", "Unsharded Param", "All Gather", "Reduce Scatter", "Temp", ...;
    engine/strategies/fsdp_peak.py)."""

    @property
    def total(self) -> int:
        """Parameters, gradients, optimizer state and activations together."""
        return self.params + self.grads + self.optimizer + self.activations

    @property
    def other(self) -> int | None:
        """What the step held beyond the kinds counted (gathered parameters, communication buffers,
        temporaries), so that a bar of the kinds and this reaches the step's peak: on GPUs the allocator's
        peak less those kinds; else fsdp's tracked peak less them (the kinds' maxima come at other moments
        of the step than its peak, so this is less than its transient kinds); None where neither tells (a CPU
        device has no allocator to ask)."""
        if self.allocated_peak is not None:
            return max(0, self.allocated_peak - self.total)
        if self.step_peak is None:
            return None
        return max(0, sum(self.step_peak.values()) - self.total)

    def text(self) -> str:
        """"2.78 MiB (params 1.01, grads 1.01, optimizer 0, activations 0.75)", as the CLI, report and app say it."""
        mib = 2 ** 20
        parts = ", ".join(f"{kind} {getattr(self, kind) / mib:.3g}"
                          for kind in ("params", "grads", "optimizer", "activations"))
        allocated = f"; other {self.other / mib:.3g}, allocator peak {self.allocated_peak / mib:.3g} MiB" \
            if self.allocated_peak else ""
        return f"{self.total / mib:.3g} MiB ({parts}{allocated})"

    def step_peak_text(self) -> str | None:
        """"3.41 MiB (Sharded Param 0.507, Unsharded Param 0.251, ...)": the tracked step's peak by torch's
        kinds, as the CLI, report and app say it; None without one."""
        if not self.step_peak:
            return None
        mib = 2 ** 20
        kinds = ", ".join(f"{kind} {size / mib:.3g}" for kind, size in self.step_peak.items())
        return f"{sum(self.step_peak.values()) / mib:.3g} MiB ({kinds})"


@dataclass(frozen=True)
class Traffic:
    """One kind of collective on a device, per measured step (engine/measure/communication.py): the payload's bytes."""
    operation: str                  # engine.measure.communication.OPERATIONS: "all-gather", "reduce-scatter", ...
    calls: float = 0.0
    bytes: float = 0.0
    seconds: float | None = None    # None: counted, not timed (gloo's sends and receives: their waits are "wait")


@dataclass(frozen=True)
class Communication:
    """What a device's collectives moved per measured step, by operation."""
    traffic: list[Traffic] = field(default_factory=list)

    @property
    def bytes(self) -> float:
        return sum(t.bytes for t in self.traffic)

    @property
    def seconds(self) -> float | None:
        """The timed operations' seconds; None when none was timed."""
        timed = [t.seconds for t in self.traffic if t.seconds is not None]
        return sum(timed) if timed else None

    def text(self) -> str:
        """"2.1 MiB in 3.4 ms a step (all-gather 1.4 MiB 9x 2.2 ms, reduce-scatter 0.7 MiB 5x 1.2 ms)"."""
        mib = 2 ** 20

        def ms(seconds: float | None) -> str:
            return f" {seconds * 1e3:.3g} ms" if seconds is not None else ""
        parts = ", ".join(f"{t.operation} {t.bytes / mib:.3g} MiB {t.calls:.3g}x{ms(t.seconds)}" for t in self.traffic)
        timed = f" in{ms(self.seconds)}" if self.seconds is not None else ""
        return f"{self.bytes / mib:.3g} MiB{timed} a step ({parts})"


@dataclass(frozen=True)
class NodeSummary:
    """One machine of a run over several (engine/nodes): who it was, its ranks, and how its clock was put on
    the coordinator's."""
    label: str                        # "node0": how devices ("node0/cpu:1"), lanes and errors name it
    address: str                      # its agent's ADDR:PORT
    hostname: str | None = None
    ranks: list[int] = field(default_factory=list)
    clock_offset_s: float | None = None   # its clock minus the coordinator's, subtracted from its times
    clock_rtt_s: float | None = None      # the round trip it was measured over (the offset is good to half)
    clock_drift_s: float | None = None    # how far the offset moved by the run's end (followed meanwhile)

    def text(self) -> str:
        """"node1 10.0.0.3:29400 (gpu-07): ranks 2-3, clock +1.2 ms": how the CLI and the app list a node."""
        ranks = self.ranks
        which = (f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks[0]}-{ranks[-1]}") if ranks else "no ranks"
        host = f" ({self.hostname})" if self.hostname else ""
        offset = self.clock_offset_s
        clock = "" if offset is None else (f", clock {offset * 1e3:+.1f} ms" if abs(offset) < 1 else
                                           f", clock {offset:+.3f} s")
        return f"{self.label} {self.address}{host}: {which}{clock}"


@dataclass(frozen=True)
class DeviceKinds:
    """One device's mean seconds per measured step: in all, by kind (each moment once, overlaps in ``hidden``:
    engine/record/time_by_kind.py exclusive), in no busy kind (``idle``), and outside its steps (a script's eval)."""
    device: str
    step_s: float
    by_kind: dict[str, float] = field(default_factory=dict)
    idle_s: float = 0.0
    hidden: dict[str, float] = field(default_factory=dict)
    between_steps: dict[str, float] = field(default_factory=dict)

    @property
    def other_s(self) -> float:
        """The step's time in no kind (the script's own Python between the hooks' marks): RunTotals' ``other``."""
        return self.by_kind.get("other", 0.0)

    @property
    def idle_share(self) -> float:
        return self.idle_s / self.step_s if self.step_s > 0 else 0.0

    def share(self, kind: str) -> float:
        return self.by_kind.get(kind, 0.0) / self.step_s if self.step_s > 0 else 0.0


@dataclass(frozen=True)
class SplitCost:
    """What splitting one micro-batch's backward into input and weight gradient costs a device, in seconds,
    beyond the whole backward (engine/strategies/split_backward_probe.py): ``extra_s`` at the run's micro-batch,
    of which ``fixed_s`` would be paid at any size (the rest grows with the samples)."""
    extra_s: float
    fixed_s: float

    def at(self, scale: float) -> float:
        """The extra for micro-batches ``scale`` times the run's."""
        return self.fixed_s + (self.extra_s - self.fixed_s) * scale


@dataclass(frozen=True)
class RunSummary:
    run_id: str | None = None
    status: str = "finished"
    strategy: str = ""
    model: str = ""
    devices: list[str] = field(default_factory=list)    # each physical device once, in stage order
    split: list[int] | None = None
    micro_batches: int | None = None
    schedule: str | None = None
    batch_size: int | None = None
    steps: int = 0
    steps_measured: int = 0
    step_time_s: MeanStd | None = None
    throughput: MeanStd | None = None
    loss: Loss | None = None
    param_norm: float | None = None
    param_change: float | None = None
    devices_busy: list[float] = field(default_factory=list)
    stage_busy: list[float] | None = None
    stage_balance: float | None = None
    bubble: Bubble = field(default_factory=Bubble)
    batch_split: list[BatchSplit] | None = None
    notes: list[str] = field(default_factory=list)
    timeline_steps: int | None = None
    tensor_memory: list[TensorMemory | None] | None = None   # per device, in ``devices`` order
    communication: list[Communication | None] | None = None  # per device, in ``devices`` order
    optimizer: str | None = None          # engine.precision.OPTIMIZERS
    dtype: str | None = None              # engine.precision.DTYPES
    telemetry: TelemetrySummary | None = None
    plan: list[list[str]] | None = None   # the schedule's actions per rank, tick by tick ("0F1", "" idle)
    nodes: list[NodeSummary] | None = None  # the machines of a run over several (--nodes), in rank order
    # per device, seconds a micro-batch's backward takes longer split into input and weight gradient than
    # whole, measured after a pipeline run's last step (engine/strategies/split_backward_probe.py)
    split_backward_extra_s: list[float | None] | None = None
    split_backward_fixed_s: list[float | None] | None = None   # the part of each paid at any micro-batch size
    two_way_extra_s: float | None = None   # sending both ways at once, beyond one way (exchange_probe.py)
    # per device, in ``devices`` order: mean seconds per measured step by kind, and idle (DeviceKinds)
    time_by_kind: list[DeviceKinds] | None = None
    diagnosis: str | None = None          # which device idles or waits most, and on what (time_by_kind.diagnosis)
    efficiency: Efficiency | None = None  # FLOPs, MFU and energy per device (engine.record.efficiency)
    script: ScriptFacts | None = None     # a watched script's model, optimizers, samples' source (docs/summary.md)
    traces: TraceSource | None = None     # a run of kind trace: the profiler traces it was read from
    findings: list[Finding] = field(default_factory=list)   # what explains the step, most first (diagnosis: 1st)
    recording_cpu_s: dict[str, float] | None = None   # CPU a step: the worker's, the session's, the telemetry's

    def replace(self, **changes) -> RunSummary:
        return dataclasses.replace(self, **changes)

    @property
    def common_batch_split(self) -> list[int] | None:
        """The split most steps had (a dataset's last, smaller batch splits differently)."""
        return max(self.batch_split, key=lambda entry: entry.steps).split if self.batch_split else None


@dataclass(frozen=True)
class Step:
    """One merged step, as the worker reports it and the store keeps it."""
    step: int
    t: float | None = None               # seconds since the run started, at the step's end
    time_s: float | None = None
    samples: int | None = None
    throughput: float | None = None
    loss: float | None = None
    busy: dict[str, float] | None = None         # device -> busy share of the step
    batch_split: list[int] | None = None
    tensor_memory: dict[str, dict] | None = None   # device -> bytes by kind where it changed (fsdp: step_peak too)
    # As the worker reports it (engine.events); the store keeps the intervals in its timeline table:
    work: dict[str, float] | None = None         # device -> share without drawing the batch, where a step drew one
    intervals: dict[str, list[list]] | None = None          # device -> [[kind, t0, t1], ...], run clock
    communication: dict[str, dict[str, list]] | None = None  # device -> operation -> [calls, bytes, seconds]
    flops: dict[str, float] | None = None        # device -> FLOPs of its work in this step, where counted (the second)


@dataclass(frozen=True, slots=True)
class Sample(DeviceSample):
    """A stored telemetry row: a sample with ``t`` counted from the run's start, or an aggregate over
    ``span_s`` seconds (the measurements' means, memory's maxima: ``Store.thin_samples``)."""
    span_s: float | None = None


# ---- an experiment ------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedPoint:
    """A point an experiment set out to run: its label, its config as stored (ExperimentConfig.to_dict), its
    swept value and line."""
    label: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    x: float | None = None
    series: str | None = None     # the sweep's line it is on (ExperimentPoint.series)


@dataclass(frozen=True)
class ExperimentPlan:
    """What an experiment set out to run, stored as it starts (the store's ``params``): the base config, the
    runs per point and the points, so an experiment that never finished is rebuilt from the runs it kept."""
    base: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    points: list[PlannedPoint] = field(default_factory=list)


@dataclass(frozen=True)
class ExperimentPoint:
    label: str
    strategy: str | None = None
    x: float | None = None               # the swept value; None when nothing is swept
    devices: list[str] = field(default_factory=list)
    split: list[int] | None = None
    micro_batches: int | None = None
    schedule: str | None = None
    step_time_s: MeanStd | None = None   # mean and std of the runs' means (one run: its step-to-step std)
    step_time_range: list[float] | None = None   # [min, max] of the runs' mean step times
    throughput: MeanStd | None = None
    bubble: Bubble = field(default_factory=Bubble)
    devices_busy: list[float] = field(default_factory=list)
    stage_busy: list[float] | None = None
    stage_balance: float | None = None
    util_mean: list[float | None] | None = None
    peak_mem_bytes: list[int | None] | None = None
    batch_split: list[int] | None = None
    run_ids: list[str] = field(default_factory=list)
    error: str | None = None             # the point's runs failed: why
    predicted_step_s: float | None = None   # engine.plan.what_if's step time, from one of its runs (experiments.with_predictions)
    tensor_memory: list[TensorMemory | None] | None = None   # per device, its first run's (memory repeats)
    communication: list[Communication | None] | None = None  # per device, per step, its first run's
    disturbed: str | None = None         # a run of the point was disturbed (TelemetrySummary.disturbed): which, how
    input_wait: float | None = None      # the share of its step the device most on its input spends so
                                         # (time_by_kind.input_share), mean over the runs; None where none is
    series: str | None = None            # the sweep's line it belongs to (default: its strategy's)
    mfu: float | None = None             # the run's MFU (Efficiency.mfu), mean over the runs that have one
    samples_per_joule: float | None = None   # likewise (Efficiency.samples_per_joule: GPUs' energy counters)

    def spread(self) -> tuple[float, float] | None:
        """The step times this point's measurement cannot tell apart: mean ± std, widened to its runs'
        min-max. None for a point not measured."""
        if self.step_time_s is None:
            return None
        low, high = self.step_time_s.mean - self.step_time_s.std, self.step_time_s.mean + self.step_time_s.std
        if self.step_time_range:
            low, high = min(low, self.step_time_range[0]), max(high, self.step_time_range[1])
        return low, high

    @property
    def stages_per_device(self) -> int | None:
        return (len(self.split) + 1) // len(self.devices) if self.split and self.devices else None


@dataclass(frozen=True)
class ExperimentResult:
    experiment_id: str | None = None
    name: str = ""
    status: str = "finished"             # finished, stopped, or incomplete (rebuilt from its runs)
    best: str | None = None              # the fastest measured point's label
    tied: list[str] = field(default_factory=list)   # points within the fastest's spread: then no point is best
    points: list[ExperimentPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    automatic_split: list[int] | None = None
    error: str | None = None             # why the experiment could not go on (status "failed")

    def point(self, label: str) -> ExperimentPoint | None:
        return next((p for p in self.points if p.label == label), None)

    @property
    def measured(self) -> list[ExperimentPoint]:
        return [p for p in self.points if p.step_time_s is not None]

    @property
    def winner(self) -> str | None:
        """The best point's label when it beats every other beyond their spread; None when tied."""
        return None if self.tied else self.best

    def ranked_by(self, key: str) -> list[ExperimentPoint]:
        """The measured points that have ``key`` ("mfu", "samples_per_joule"), most first."""
        return sorted((p for p in self.measured if getattr(p, key) is not None), key=lambda p: -getattr(p, key))

    def rankings(self) -> list[str]:
        """"by MFU: pipeline > ddp > single", and by samples per joule, where two points or more have one."""
        lines = []
        for key, name in (("mfu", "MFU"), ("samples_per_joule", "samples per joule")):
            ranked = self.ranked_by(key)
            if len(ranked) > 1:
                lines.append(f"by {name}: " + " > ".join(p.label for p in ranked))
        return lines

    def verdict(self) -> str | None:
        """How views name the outcome: "best pipeline", or "tied: pipeline, ddp (within their spread)"."""
        if self.best is None:
            return None
        if self.tied:
            return f"tied: {', '.join([self.best, *self.tied])} (within their spread)"
        return f"best {self.best}"


def mean_std(means: list[float], within: list[float]) -> MeanStd:
    """Across repeats when there are several; otherwise the single run's own step-to-step std."""
    mean = statistics.fmean(means)
    std = statistics.stdev(means) if len(means) > 1 else (within[0] if within else 0.0)
    return MeanStd(mean, std)
