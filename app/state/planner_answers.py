"""What the planner process answers (app/services/planner_service.py), typed: one JSON line each, tagged by ``kind``.

The planner writes them with ``encode``; the app's client (app/services/planner_client.py)
reads them back with ``decode`` and hands the objects on; a line that is no answer, or an
answer of a kind this app does not know, is None.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from engine.plan.planning import BlockInfo
from engine.problems import Problem
from engine.results import from_json


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
_KINDS: dict[str, type] = {"ready": Ready, "check": Checked, "profiling": Profiling, "blocks": Profiled}
_NAMES = {kind: name for name, kind in _KINDS.items()}


def encode(answer: Answer) -> str:
    return json.dumps({"kind": _NAMES[type(answer)], **dataclasses.asdict(answer)})


def decode(line: bytes | str) -> Answer | None:
    """The answer on ``line``; None for a line that is none, or of a kind this app does not know."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    kind = _KINDS.get(data.get("kind")) if isinstance(data, dict) else None
    return from_json(kind, data) if kind is not None else None
