"""What a rank process tells its worker: one typed event per line of JSON, tagged by ``type`` (docs/protocol.md).

engine.run.rank and engine.run.loop make them, ``line`` writes them (a rank
on a node sends the same lines through its agent, engine/nodes, which moves
their times onto the coordinator's clock), and the worker reads them back with
``decode`` at the one place it takes them in (engine.run.worker): every field checked
(engine/wire/codec.py), a garbled one a WireError naming the field; its step merger
(engine.record.step_merger.StepMerger) takes the ``StepReport``s. Fields a newer rank
adds are ignored by an older worker; ``time`` (when the rank wrote the line) is the
channel's, not the event's. The worker tells its ranks the run in their environment:
the config (ExperimentConfig.to_json) and the devices (``devices_text``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.devices import Device
from engine.wire import codec


@dataclass(frozen=True)
class Ready:
    """The rank built its part of the model and is about to train."""
    pid: int
    split: list[int] | None = None             # the split it resolved (staged strategies)
    batch_norm: bool = False                   # the model has BatchNorm
    plan: list[list[str]] | None = None        # the schedule's action list per rank (rank 0 only)
    peaks: dict[str, dict] | None = None       # its devices' peaks: {"measured": Peak, "datasheet": Peak}, as JSON


@dataclass
class StepReport:
    """One step on one rank, its intervals on the rank's own clock (the merger moves them; mutable for
    engine.record.step_merger.separate_collective_waits, which cuts waits out of collectives in place)."""
    step: int
    start: float
    end: float
    # device -> [kind, t0, t1]; None and a null samples are read as none (a synthetic rank writes them so)
    intervals: dict[str, list[list]] | None = field(default_factory=dict)
    loss_part: float | None = None
    samples: int | None = 0
    batch_split: list[int] | None = None
    # device -> bytes by kind, where it changed (and fsdp's step_peak: {torch's kind: bytes})
    tensor_memory: dict[str, dict] | None = None
    communication: dict[str, dict[str, list]] | None = None  # device -> operation -> [calls, bytes, seconds]
    flops: dict[str, int] | None = None      # device -> FLOPs of this step's work, on the step counted (the second)

    def __post_init__(self):
        # A rank may write null for "none" (a synthetic one does): the merger reads them as empty.
        self.intervals = self.intervals or {}
        self.samples = self.samples or 0


@dataclass(frozen=True)
class Profiled:
    """A profiler trace of some steps is written (engine.measure.profiling)."""
    path: str
    start: float


@dataclass(frozen=True)
class Done:
    """Training ended: what the rank reports once."""
    param_sq: float | None = None
    change_sq: float | None = None
    split_backward_extra_s: float | None = None   # engine/strategies/pipeline/split_backward_probe.py
    split_backward_problem: str | None = None     # why a pipeline rank could not measure it
    note: str | None = None                       # what a reader must know of its steps (a watched script's): a
                                                  # line a note
    peaks: dict[str, dict] | None = None          # a watched script's devices' peaks, in the dtype it ran in
    split_backward_fixed_s: float | None = None   # the part of split_backward_extra_s paid at any micro-batch size
    two_way_extra_s: float | None = None          # engine/strategies/pipeline/exchange_probe.py
    two_way_problem: str | None = None            # why a pipeline rank could not measure it
    script: dict | None = None                    # a watched script's ScriptFacts, as JSON (engine/watch)
    unformulated: dict[str, float] | None = None  # its counted step's seconds in operations without a FLOP formula


@dataclass(frozen=True)
class Failed:
    """The rank caught an exception: it exits non-zero after this."""
    message: str
    traceback: str | None = None


@dataclass(frozen=True)
class Phase:
    """The rank began a part of its start (engine/run/heartbeat.py PHASES): progress, as a step is."""
    name: str


@dataclass(frozen=True)
class Alive:
    """The rank's heartbeat (engine/run/heartbeat.py): the process answers, and what its main thread is in. Not
    progress: a rank stuck in a step still beats."""
    phase: str
    where: str | None = None          # the main thread's innermost frame of note: "forward (model.py:41)"
    in_collective: bool = False       # inside torch.distributed: waiting on its peers, most likely


RankEvent = Ready | StepReport | Profiled | Done | Failed | Phase | Alive
CHANNEL = codec.Channel("a rank's events", "type", {
    "ready": Ready, "rank_step": StepReport, "profile": Profiled, "done": Done, "error": Failed, "phase": Phase,
    "alive": Alive})


def encode(event: RankEvent) -> dict:
    """The event as the JSON object the channel writes (its fields and ``type``)."""
    return CHANNEL.encode(event)


def decode(message: dict) -> RankEvent | None:
    """The event a line's JSON object holds; None for a type this worker does not know; codec.WireError naming
    the field where a known type lacks one or has one of another type (a garbled line)."""
    return CHANNEL.decode(message)


def line(event: RankEvent, time: float) -> str:
    """The event as the rank writes it: one line of JSON (no newline), ``time`` when it wrote it."""
    return codec.dumps({**CHANNEL.encode(event), "time": time}, finite=True)


def devices_text(devices: list[Device]) -> str:
    """Every device of the run, in rank order, as a rank's environment carries them (SPLITSCOPE_DEVICES)."""
    return codec.dumps([d.to_dict() for d in devices])


def read_devices(text: str) -> list[Device]:
    """The devices ``devices_text`` wrote; codec.WireError where an entry is no device."""
    entries = codec.loads(text, "the rank's devices")
    if not isinstance(entries, list):
        raise codec.WireError("not a list", "the rank's devices")
    return [codec.typed(Device, entry, "the rank's devices") for entry in entries]
