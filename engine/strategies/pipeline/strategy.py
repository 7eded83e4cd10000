"""pipeline: the naive split with the batch cut into micro-batches that flow through the stages together;
model-parallel: the same stages with one micro-batch, the whole batch at a time.

On CPU virtual devices and on distinct GPUs each stage is a process and
torch.distributed.pipelining runs the GPipe or 1F1B schedule. With a GPU shared
by stages, or CPU and GPU mixed, the stages share one process and run the
tutorial's split-size loop (GPipe order).
"""
from __future__ import annotations

from engine.models import effective_batch_size
from engine.problems import Problem
from engine.strategies.pipeline import staged
from engine.strategies.pipeline.schedules import SCHEDULE_INFO
from engine.strategies.strategy import Strategy


class Pipeline(Strategy):
    rank_imports = ("engine.strategies.pipeline.scheduled_stages",
                    "engine.strategies.pipeline.in_process_traced_stages",
                    "engine.strategies.pipeline.in_process_stages")
    name = "pipeline"
    description = ("Split into stages and cut the batch into micro-batches that flow through the stages together "
                   "(any of torch's pipeline schedules: GPipe, 1F1B, interleaved, zero bubble).")
    uses_split = True
    uses_micro_batches = True

    def world_size(self, config, devices) -> int:
        return len(devices) if staged.distinct_processes(devices) else 1

    def stages_per_device(self, config) -> int:
        """Stages per device: 1 unless the strategy cuts micro-batches and its schedule places several on each
        (here rather than in Strategy, so that the base class needs no schedule: model-parallel cuts none)."""
        known = SCHEDULE_INFO.get(config.schedule)
        return known.per_device(config.stages_per_device) if self.uses_micro_batches and known else 1

    def micro_batch_problems(self, config) -> list[Problem]:
        """The schedule's stages per device; micro-batches (or their size) at least 1 and dividing the batch
        (a model file's default batch too: a traced stage is fixed to the micro-batch's shape)."""
        found = []
        schedule = SCHEDULE_INFO.get(config.schedule)   # an unknown one is the config's own check
        if config.stages_per_device is not None and schedule is not None \
                and config.stages_per_device not in schedule.stages_per_device:
            allowed = " or ".join(map(str, schedule.stages_per_device))
            found.append(Problem("stages_per_device", f"the {config.schedule} schedule runs {allowed} stage(s) per "
                                                      f"device, got {config.stages_per_device}"))
        for name in ("micro_batches", "split_size"):
            value = getattr(config, name)
            if value is not None and value < 1:
                found.append(Problem(name, f"must be at least 1, got {value}"))
        batch = effective_batch_size(config)
        if batch and batch >= 1:
            if config.micro_batches and config.micro_batches >= 1 and batch % config.micro_batches:
                found.append(Problem("micro_batches", f"must divide the batch size {batch}; {config.micro_batches} "
                                                      "does not"))
            if config.split_size and config.split_size >= 1:
                if config.split_size > batch:
                    found.append(Problem("split_size", f"must be at most the batch size {batch}, got "
                                                       f"{config.split_size}"))
                elif batch % config.split_size:
                    found.append(Problem("split_size", f"must divide the batch size {batch}; {config.split_size} "
                                                       "does not"))
        return found

    def check(self, config, devices, n_blocks) -> list[Problem]:
        v = self.stages_per_device(config)
        found = staged.check_stages(config, devices, n_blocks, v)
        schedule = SCHEDULE_INFO.get(config.schedule)
        if schedule is None:
            return found  # named by the config's own check
        problem = schedule.micro_batch_problem(self.micro_batches(config), len(devices), v)
        if problem:
            found.append(Problem("micro_batches", problem))
        if schedule.name != "gpipe" and not staged.distinct_processes(devices):
            found.append(Problem("schedule", f"{schedule.name} needs one process per device (CPU virtual devices "
                                             "or distinct GPUs); with shared or mixed devices use gpipe"))
        return found

    def devices_needed(self, config) -> int:
        """One per stage, or per V stages with a schedule that places several on each device."""
        if config.split is None:
            return 2
        return max(2, (len(config.split) + 1) // self.stages_per_device(config))

    def build(self, ctx):
        return self._stages(ctx, self.micro_batches(ctx.config), ctx.config.schedule)

    @staticmethod
    def _stages(ctx, micro_batches: int, schedule: str):
        if ctx.world_size > 1:
            from engine.strategies.pipeline.scheduled_stages import ScheduledStages
            return ScheduledStages(ctx, micro_batches=micro_batches, schedule=schedule)
        if ctx.spec.traced:
            from engine.strategies.pipeline.in_process_traced_stages import InProcessTracedStages
            return InProcessTracedStages(ctx, micro_batches=micro_batches)
        from engine.strategies.pipeline.in_process_stages import InProcessStages
        return InProcessStages(ctx, micro_batches=micro_batches)


class ModelParallel(Pipeline):
    name = "model-parallel"
    description = ("Naive split: stage k's blocks on device k, one whole batch at a time, so only one device works "
                   "at any moment.")
    uses_micro_batches = False
    micro_batch_problems = Strategy.micro_batch_problems   # it cuts none: the options are not its

    def world_size(self, config, devices) -> int:
        # On GPUs the naive split keeps the tutorial's one-process shape.
        return len(devices) if staged.all_cpu(devices) else 1

    def check(self, config, devices, n_blocks) -> list[Problem]:
        return staged.check_stages(config, devices, n_blocks)

    def build(self, ctx):
        return self._stages(ctx, 1, "gpipe")
