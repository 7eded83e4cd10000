"""The app and its planner process (app/services/planner_service.py): requests on its stdin, typed answers on
its stdout, one JSON line each.

The app's client (app/services/planner_client.py) writes each ``Request`` with ``request_line``; the planner
reads it with ``read_request``. The planner writes its answers, tagged by ``kind``, with ``encode``; the client
reads them back with ``decode`` and hands the objects on: a line that is no JSON (a library's print) or an
answer of a kind this app does not know is None, an answer of a known kind with a field missing or of another
type a codec.WireError naming it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.problems import Problem
from engine.wire import codec


@dataclass(frozen=True)
class BlockInfo:
    """A block of the model as the planner timed it (engine/planner/planning.py block_costs)."""
    name: str
    params: int          # parameters in the block
    cost_s: float        # forward+backward seconds for the profiled batch, on block_clock(device)
    out_bytes: int       # bytes of activation leaving the block, per sample
    kind: str = ""       # the block's module class ("BasicBlock", "Linear")
    flops: float = 0.0   # its forward+backward's FLOPs per sample (torch's formulas: engine/measure/flops.py)
    forward_s: float = 0.0   # the forward's part of cost_s (its best repeat: engine/advise predicts each apart)


@dataclass(frozen=True)
class Request:
    """Check ``config`` (an ExperimentConfig's dict) and, with ``profile``, time its blocks; its answers carry
    ``id``."""
    id: int
    config: dict
    profile: bool = False
    stages: int | None = None


def request_line(request: Request) -> str:
    return codec.dumps(request)


def read_request(line: str) -> Request:
    """The request on ``line``; codec.WireError naming the field where it is garbled."""
    return codec.read(Request, line, "the planner's requests")


@dataclass(frozen=True)
class Ready:
    """torch is imported: the planner answers within milliseconds from now."""


@dataclass(frozen=True)
class Checked:
    """A config checked (engine.run.validate.plan): its problems, and what its plan says of the model."""
    id: int
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stages: int | None = None
    n_blocks: int | None = None
    block_names: list[str] | None = None       # none when the check found problems


@dataclass(frozen=True)
class Profiling:
    """A heavy model's profile, this far."""
    id: int
    fraction: float = 0.0


@dataclass(frozen=True)
class Profiled:
    """The model's blocks as timed on the config's first kind of device, and each block's time on every kind of
    device the config names; none, with ``error``, when the profile failed, or ``superseded`` by a newer request."""
    id: int
    blocks: list[BlockInfo] | None = None
    costs_by_kind: dict[str, list[float]] | None = None
    error: str | None = None
    traceback: str | None = None
    superseded: bool = False


Answer = Ready | Checked | Profiling | Profiled
CHANNEL = codec.Channel("the planner's answers", "kind", {"ready": Ready, "check": Checked, "profiling": Profiling,
                                                         "blocks": Profiled})


def encode(answer: Answer) -> str:
    return CHANNEL.line(answer)


def decode(line: bytes | str) -> Answer | None:
    """The answer on ``line``; None for a line that is none, or of a kind this app does not know; codec.WireError
    for an answer of a known kind that is garbled."""
    try:
        data = codec.loads(line, CHANNEL.name)
    except codec.WireError:
        return None
    return CHANNEL.decode(data) if isinstance(data, dict) else None
