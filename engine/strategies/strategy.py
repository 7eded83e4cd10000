"""The one small interface every strategy implements (torch-free: the CLI, the app and the worker ask it).

A strategy is a class registered in ``engine.strategies.STRATEGIES`` under its
``name``, with a one-line ``description`` the app's picker and the CLI's help both
show, and what it can do (``uses_split``, ``uses_micro_batches``,
``data_parallel``, ``needs_process_group``). It answers three questions:

- ``world_size(config, devices)``: how many rank processes the run needs;
- ``check(config, devices, n_blocks)``: what it cannot do with these (before launch);
- ``model_problems(config, spec, devices)``: what it cannot do with the model itself;
- ``build(ctx)``: on a rank, the Executor that places the model and runs one step
  (engine.strategies.base; executors import torch, so ``build`` imports them).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.config import ExperimentConfig
    from engine.devices import Device
    from engine.problems import Problem
    from engine.strategies.base import Executor, RankContext


class Strategy:
    name: str = ""
    description: str = ""
    uses_split = False            # has split points (stages)
    uses_micro_batches = False    # cuts the batch into micro-batches (--micro-batches, --split-size, --schedule)
    data_parallel = False         # the batch is split over replicas; reports each one's batch size
    needs_process_group = False   # a torch.distributed group even with one process
    collectives_span_all_ranks = True  # every collective takes every rank (engine.record.summary separates their waits)

    def world_size(self, config: ExperimentConfig, devices: list[Device]) -> int:
        return 1

    def check(self, config: ExperimentConfig, devices: list[Device], n_blocks: int) -> list[Problem]:
        return []

    def model_problems(self, config: ExperimentConfig, spec, devices: list[Device]) -> list[Problem]:
        """What it cannot do with this model (built on the meta device, before launch): engine.run.validate."""
        return []

    def build(self, ctx: RankContext) -> Executor:
        raise NotImplementedError

    def devices_needed(self, config: ExperimentConfig) -> int:
        """How many devices "auto" should give this strategy: one per stage, else two."""
        return len(config.split) + 1 if config.split is not None else 2

    def __repr__(self) -> str:
        return f"<strategy {self.name}>"
