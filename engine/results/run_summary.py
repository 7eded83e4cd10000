"""A run's results, typed: its summary (``RunSummary``) and sections, a merged step, a stored sample."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from engine.results.efficiency import Efficiency  # the efficiency section: its own module's types
from engine.results.read_facts import Finding, ScriptFacts, TraceSource  # what was read (a script, traces); findings
from engine.telemetry.sample import DeviceSample
from engine.telemetry.summary import TelemetrySummary  # the telemetry section: its own layer's type


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
    beyond the whole backward (engine/strategies/pipeline/split_backward_probe.py): ``extra_s`` at the run's
    micro-batch, of which ``fixed_s`` would be paid at any size (the rest grows with the samples)."""
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
    # whole, measured after a pipeline run's last step (engine/strategies/pipeline/split_backward_probe.py)
    split_backward_extra_s: list[float | None] | None = None
    split_backward_fixed_s: list[float | None] | None = None   # the part of each paid at any micro-batch size
    two_way_extra_s: float | None = None   # sending both ways at once, beyond one way (pipeline/exchange_probe.py)
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
