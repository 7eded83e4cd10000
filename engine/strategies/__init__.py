"""The strategy registry: one class per strategy, registered by name, importable without torch.

The GUI's picker and the CLI's help both read ``STRATEGIES`` (name, description,
capabilities: engine/strategies/strategy.py). A strategy's executors import
torch only when a rank builds one, because importing torch costs seconds.
"""
from __future__ import annotations

from engine.strategies.data_parallel import DataParallel
from engine.strategies.ddp import Ddp
from engine.strategies.pipeline.schedules import SCHEDULE_INFO, SCHEDULES  # noqa: F401 (the registry's schedules)
from engine.strategies.pipeline.strategy import ModelParallel, Pipeline
from engine.strategies.script import Script
from engine.strategies.sharded import Fsdp, FsdpTp, Hsdp, TensorParallel
from engine.strategies.single import Single
from engine.strategies.strategy import Strategy

STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Single(), DataParallel(), Ddp(), ModelParallel(), Pipeline(),
                                                        Fsdp(), Hsdp(), TensorParallel(), FsdpTp(),
                                                        Script())}


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
