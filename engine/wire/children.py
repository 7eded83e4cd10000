"""The children a launcher starts for one answer: what it writes on their stdin and reads on their stdout.

- the validation child (``python -m engine.run.validate``): a ``CheckRequest``, answered by a list of
  ``CheckAnswer`` (one a config, in order);
- advise's probe child (``python -m engine.advise.ranking``): a ``RankingRequest``, answered by its Ranking
  (engine/advise/results.py, read with ``codec.read``);
- ``main.py what-if RUN --json`` (the app's what-if child, an experiment's end): a list of
  engine/planner/what_if.py Prediction, read with ``read_list``;
- ``main.py trace ... --store --json`` (the app's trace child): the traces read, and ``StoredTraces.run_id``.

Every answer is read strictly (engine/wire/codec.py): an answer of another shape is a codec.WireError naming
the child and the field, which the launcher reports as the child's failure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.problems import Problem
from engine.wire import codec

VALIDATION = "the validation child"


@dataclass(frozen=True)
class CheckItem:
    config: dict                       # ExperimentConfig.to_dict()
    tokens: list | None = None         # its --split tokens (block indices or names), or None


@dataclass(frozen=True)
class CheckRequest:
    names_only: bool
    items: list[CheckItem] = field(default_factory=list)


@dataclass(frozen=True)
class CheckAnswer:
    config: dict                       # the config as resolved (its split named by blocks)
    plan: dict | None = None           # engine/run/resolved_run.py ResolvedRun.to_dict(), or None where it has problems
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class RankingRequest:
    config: dict
    memory_limit: int | None = None


@dataclass(frozen=True)
class StoredTraces:
    """What the app reads of ``main.py trace --store --json``: the run the traces were stored as."""
    run_id: str | None = None


def read_list(cls: type, text: str | bytes, channel: str) -> list[Any]:
    """A JSON list of ``cls`` objects, each read strictly; codec.WireError naming ``channel`` otherwise."""
    rows = codec.loads(text, channel)
    if not isinstance(rows, list):
        raise codec.WireError("not a list", channel)
    return [codec.typed(cls, row, channel) for row in rows]
