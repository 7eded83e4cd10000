"""What advise finds, typed (docs/advise.md): what it measured of the model and of the devices, each candidate with
its prediction and, where it was run, its measurement, and the advice made of them.

Plain data, torch-free: the probe's child process sends ``Ranking`` to the command line's process as JSON
(engine.results.to_json / from_json), which runs the checks and answers with ``Advice``.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BlockProbe:
    """One block (split unit) of the model as the probe timed it on one device: its forward and backward as a time
    per call and a time per sample (from two batch sizes: a micro-batch of 8 samples costs more than an eighth of
    one of 64), its optimizer step, and its memory."""
    name: str
    forward_fixed_s: float
    forward_per_sample_s: float
    backward_fixed_s: float
    backward_per_sample_s: float
    optimizer_s: float        # the run's optimizer stepping the block's parameters
    param_bytes: int
    out_bytes: int            # the activation leaving it, per sample (a pipeline's hand-over)
    saved_bytes: int          # what its backward keeps of its forward, per sample

    def forward_s(self, samples: float) -> float:
        return self.forward_fixed_s + self.forward_per_sample_s * samples if samples > 0 else 0.0

    def backward_s(self, samples: float) -> float:
        return self.backward_fixed_s + self.backward_per_sample_s * samples if samples > 0 else 0.0


@dataclass(frozen=True)
class LinearPair:
    """A pair of linear layers tensor parallelism splits (engine/strategies/tensor_parallel_plan.py): column-wise
    then row-wise, an all-reduce of the row layer's output in the forward and of the column layer's input gradient
    in the backward."""
    param_bytes: int
    column_in: int      # features
    row_out: int


@dataclass(frozen=True)
class ModelProbe:
    """The model, probed once on the first device (engine/advise/model_probe.py)."""
    blocks: list[BlockProbe]
    probed_samples: int          # the larger of the two batch sizes timed
    whole_step_s: float          # one device's whole training step at ``probed_samples`` (loss, optimizer in it)
    step_overhead_s: float       # that step less its blocks' timed work and optimizer: what every rank's step pays
    state_bytes_per_param_byte: float   # parameters, gradients and optimizer state, per byte of parameters
    tensor_parallel_pairs: list[LinearPair] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def param_bytes(self) -> int:
        return sum(b.param_bytes for b in self.blocks)


@dataclass(frozen=True)
class Cost:
    """A communication's time as a line through its measurements: a latency and a time per byte."""
    latency_s: float
    per_byte_s: float

    def seconds(self, nbytes: float) -> float:
        return self.latency_s + self.per_byte_s * max(0.0, nbytes)


@dataclass(frozen=True)
class LinkProbe:
    """The devices' communication, measured by one process on each device (engine/advise/link_probe.py)."""
    devices: int
    point_to_point: Cost        # a hand-over from one device to its neighbour, sent and received
    two_way_extra_s: float      # two neighbours sending to each other at once, beyond one way
    all_reduce: Cost            # over every device
    all_gather: Cost
    reduce_scatter: Cost
    seconds: float = 0.0


@dataclass(frozen=True)
class Candidate:
    """One way to run the model on the devices: what ``main.py run`` takes for it."""
    strategy: str
    devices: str                          # as --devices takes it ("cpu:2"; single's "cpu:1")
    split: list[int] | None = None
    schedule: str | None = None
    micro_batches: int | None = None
    stages_per_device: int | None = None

    @property
    def label(self) -> str:
        """"ddp", "model-parallel split 4", "1f1b m=8 split 4", "interleaved1f1b V=2 m=8 split 2,5,7"."""
        if self.schedule is None:   # no schedule: a strategy that runs each batch whole
            return self.strategy + (f" split {_points(self.split)}" if self.split else "")
        v = f" V={self.stages_per_device}" if (self.stages_per_device or 1) > 1 else ""
        return f"{self.schedule}{v} m={self.micro_batches} split {_points(self.split)}"

    def options(self) -> dict:
        """The config's options for it (ExperimentConfig.replace)."""
        return {"strategy": self.strategy, "devices": self.devices,
                "split": tuple(self.split) if self.split else None, "schedule": self.schedule or "gpipe",
                "micro_batches": self.micro_batches, "stages_per_device": self.stages_per_device}


def _points(split: list[int] | None) -> str:
    return ",".join(map(str, split or []))


@dataclass(frozen=True)
class Prediction:
    step_s: float
    compute_s: float          # the busiest device's forward, backward and optimizer a step
    communication_s: float    # collectives or hand-overs a step, where the step waits for them
    bubble: float             # the devices' idle share of the step (a pipeline's, by its what-if)
    memory_bytes: int         # the most any device holds: parameters, gradients, optimizer state, activations
    fits: bool
    why: str                  # the above in words

    def throughput(self, batch_size: int) -> float:
        return batch_size / self.step_s if self.step_s > 0 else 0.0


@dataclass(frozen=True)
class Measured:
    """A candidate's check: a short run of it (engine/advise/verify.py)."""
    run_id: str | None
    step_s: float | None = None
    step_std_s: float | None = None
    throughput: float | None = None
    disturbed: str | None = None      # TelemetrySummary.disturbed: others took its devices' cores
    error: str | None = None


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    prediction: Prediction
    measured: Measured | None = None

    @property
    def label(self) -> str:
        return self.candidate.label

    @property
    def prediction_error(self) -> float | None:
        """The prediction's error against the measurement, (predicted - measured) / measured."""
        m = self.measured
        if m is None or not m.step_s:
            return None
        return self.prediction.step_s / m.step_s - 1.0


@dataclass(frozen=True)
class Ranking:
    """What the probe's child answers: every candidate, predicted, fitting ones first, fastest first; or the
    problems that stop advise before it runs anything."""
    candidates: list[Ranked] = field(default_factory=list)
    model: ModelProbe | None = None
    link: LinkProbe | None = None
    memory_limit_bytes: int = 0
    memory_limit_source: str = ""     # "--memory-limit", or how "auto" found it
    batch_size: int = 0
    problems: list[str] = field(default_factory=list)   # each a line: "--devices: ..."


@dataclass(frozen=True)
class Advice:
    choice: Ranked
    runner_up: Ranked | None
    tied: list[str]                   # labels measured within the choice's noise (experiments' best_and_tied)
    why: str
    run_args: list[str]               # `main.py run` ARGS reproducing the choice
    candidates: list[Ranked]
    notes: list[str]                  # a disturbed check, a budget that stopped the checks, ...
    batch_size: int
    memory_limit_bytes: int
    memory_limit_source: str
    probe_s: float
    check_s: float
    elapsed_s: float

    @property
    def checked(self) -> list[Ranked]:
        return [r for r in self.candidates if r.measured is not None and r.measured.step_s]
