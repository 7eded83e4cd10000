"""data-parallel: nn.DataParallel's steps, on CPU virtual devices and GPUs (data_parallel_executors)."""
from __future__ import annotations

from engine.problems import Problem
from engine.strategies.base import replica_device_problems
from engine.strategies.strategy import Strategy


class DataParallel(Strategy):
    rank_imports = ("engine.strategies.data_parallel_executors",)
    name = "data-parallel"
    description = ("nn.DataParallel's steps in one process: scatter the batch, replicate the model from device 0, "
                   "forward on each device, gather and compute the loss on device 0, backward, reduce the "
                   "gradients to device 0; each step timed on its device.")
    data_parallel = True

    def check(self, config, devices, n_blocks) -> list[Problem]:
        return replica_device_problems(self.name, devices, "one replica per GPU")

    def build(self, ctx):
        from engine.strategies.data_parallel_executors import DataParallelSteps
        return DataParallelSteps(ctx)
