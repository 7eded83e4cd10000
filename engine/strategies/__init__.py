"""The strategy registry: names and one-line descriptions, importable without torch.

The GUI's picker and the CLI's help both read ``STRATEGIES``. A strategy's code
lives in its own module and is imported only when a run needs it
(``load(name)``), because importing torch costs seconds.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class StrategyInfo:
    name: str
    description: str
    module: str           # engine.strategies.<module> holds the implementation
    min_devices: int      # fewest devices the strategy can use
    uses_split: bool      # has split points (stages)
    uses_micro_batches: bool
    data_parallel: bool   # batch split over devices; reports per-device batch sizes


STRATEGIES: dict[str, StrategyInfo] = {
    info.name: info
    for info in (
        StrategyInfo("single", "Whole model on one device: the baseline every other strategy is compared with.",
                     "single", 1, False, False, False),
        StrategyInfo("data-parallel", "nn.DataParallel's steps in one process: scatter the batch, replicate the model "
                     "from device 0, forward on each device, gather and compute the loss on device 0, backward, "
                     "reduce the gradients to device 0; each step timed on its device.", "data_parallel", 1, False,
                     False, True),
        StrategyInfo("ddp", "DistributedDataParallel: one process per device, each on its slice of the batch, "
                     "gradients all-reduced (timed as communication).", "ddp", 1, False, False, True),
        StrategyInfo("model-parallel", "Naive split: stage k's blocks on device k, one whole batch at a time, "
                     "so only one device works at any moment.", "model_parallel", 2, True, False, False),
        StrategyInfo("pipeline", "Split into stages and cut the batch into micro-batches that flow through the "
                     "stages together (GPipe or 1F1B schedule).", "pipeline", 2, True, True, False),
    )
}

SCHEDULES = {
    "gpipe": "all forwards, then all backwards; keeps every micro-batch's activations",
    "1f1b": "one forward, one backward in steady state; keeps at most p micro-batches' activations",
}


class UnknownStrategy(ValueError):
    pass


def info(name: str) -> StrategyInfo:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UnknownStrategy(
            f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}") from None


def load(name: str):
    """The strategy's implementation module (imports torch)."""
    return importlib.import_module(f"engine.strategies.{info(name).module}")
