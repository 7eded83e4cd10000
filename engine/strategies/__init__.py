"""The strategy registry: one class per strategy, registered by name, importable without torch.

The GUI's picker and the CLI's help both read ``STRATEGIES`` (name, description,
capabilities: engine/strategies/strategy.py). A strategy's executors import
torch only when a rank builds one, because importing torch costs seconds.
"""
from __future__ import annotations

from engine.strategies.data_parallel import DataParallel
from engine.strategies.ddp import Ddp
from engine.strategies.pipeline import ModelParallel, Pipeline
from engine.strategies.single import Single
from engine.strategies.strategy import Strategy

STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Single(), DataParallel(), Ddp(), ModelParallel(), Pipeline())}

SCHEDULES = {
    "gpipe": "all forwards, then all backwards; keeps every micro-batch's activations",
    "1f1b": "one forward, one backward in steady state; keeps at most p micro-batches' activations",
}


class UnknownStrategy(ValueError):
    pass


def get(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UnknownStrategy(
            f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}") from None


def names_with(capability: str) -> list[str]:
    """The strategies that have a capability ("uses_split", "uses_micro_batches", ...), for messages."""
    return [name for name, s in STRATEGIES.items() if getattr(s, capability)]
