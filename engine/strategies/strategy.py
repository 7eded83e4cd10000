"""The one small interface every strategy implements (torch-free: the CLI, the app and the worker ask it).

A strategy is a class registered in ``engine.strategies.STRATEGIES`` under its
``name``, with a one-line ``description`` the app's picker and the CLI's help both
show, and what it can do (``uses_split``, ``uses_micro_batches``,
``data_parallel``, ``needs_process_group``). It answers these questions:

- ``micro_batches(config)``, ``stages_per_device(config)``: what it makes of the options left open
  (engine.rules asks it);
- ``option_problems(config)``: what is wrong with the options it reads, or those given that it does not
  read, from the config alone (engine.rules.problems asks it);
- ``world_size(config, devices)``: how many rank processes the run needs;
- ``placed(config, devices)``: the devices as its processes hold them;
- ``check(config, devices, n_blocks)``: what it cannot do with these (before launch);
- ``model_problems(config, spec, devices)``: what it cannot do with the model itself;
- ``build(ctx)``: on a rank, the Executor that places the model and runs one step
  (engine.strategies.base; executors import torch, so ``build`` imports them).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from engine.config import ExperimentConfig
from engine.models import effective_batch_size

if TYPE_CHECKING:
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
    collectives_span_all_ranks = True  # every collective takes every rank (engine.record.step_merger separates their waits)
    rank_module = "engine.run.rank"   # what each rank process runs (engine.run.local_ranks)
    # What its ranks import beyond the fork server's base (engine/forkserver/server.py PRELOAD): the server imports
    # them once before forking the run's ranks, so a run that does not pipeline or shard never pays for those
    rank_imports: tuple[str, ...] = ()
    builds_model = True               # trains our model (else a script of the user's: engine/strategies/script.py)
    in_picker = True                  # the app's strategy picker offers it

    def world_size(self, config: ExperimentConfig, devices: list[Device]) -> int:
        return 1

    def micro_batches(self, config: ExperimentConfig) -> int:
        """Micro-batches per step: 1 unless the strategy cuts the batch; then the given count, or as many as
        the split size makes, or 4."""
        if not self.uses_micro_batches:
            return 1
        if config.micro_batches is not None:
            return config.micro_batches
        if config.split_size:
            return max(1, -(-effective_batch_size(config) // config.split_size))
        return 4

    def stages_per_device(self, config: ExperimentConfig) -> int:
        """Stages per device: 1 unless the strategy cuts micro-batches and its schedule places several on each
        (engine.strategies.pipeline.strategy.Pipeline's, the one that does)."""
        return 1

    def option_problems(self, config: ExperimentConfig) -> list[Problem]:
        from engine.problems import Problem
        found = []
        if config.micro_batches is not None and config.split_size is not None:
            found.append(Problem("micro_batches", "give either --micro-batches or --split-size, not both"))
        return found + self.micro_batch_problems(config) + self.split_problems(config)

    def micro_batch_problems(self, config: ExperimentConfig) -> list[Problem]:
        """--stages-per-device, --micro-batches and --split-size: none for a strategy that cuts no micro-batches
        (engine.strategies.pipeline.strategy's own rules where it does)."""
        from engine.problems import Problem
        from engine.strategies import names_with
        only = " or ".join(names_with("uses_micro_batches"))
        return [Problem(name, f"applies only to --strategy {only}")
                for name in ("stages_per_device", "micro_batches", "split_size") if getattr(config, name) is not None]

    def split_problems(self, config: ExperimentConfig) -> list[Problem]:
        """--split: only for a strategy with stages, at least one point, strictly increasing."""
        from engine.problems import Problem
        from engine.strategies import names_with
        if config.split is None:
            return []
        if not self.uses_split:
            return [Problem("split", f"applies only to {' and '.join(names_with('uses_split'))}, not {self.name}")]
        if len(config.split) == 0:
            return [Problem("split", "give at least one split point")]
        if any(b <= a for a, b in zip(config.split, config.split[1:], strict=False)):
            return [Problem("split", f"split points must be strictly increasing, got "
                                     f"{','.join(map(str, config.split))}")]
        return []

    def check(self, config: ExperimentConfig, devices: list[Device], n_blocks: int) -> list[Problem]:
        return []

    def placed(self, config: ExperimentConfig, devices: list[Device]) -> list[Device]:
        """The devices as the run's processes hold them (engine.run.resolved_run.run_devices): as resolved, each CPU
        device a core of its own."""
        return devices

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
