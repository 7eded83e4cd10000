"""data-parallel: nn.DataParallel's steps, on CPU virtual devices and GPUs (data_parallel_executors)."""
from __future__ import annotations

from engine.problems import Problem
from engine.strategies.base import replica_device_problems


def world_size(config, devices) -> int:
    return 1


def check(config, devices, n_blocks) -> list[Problem]:
    return replica_device_problems("data-parallel", devices, "one replica per GPU")


def build(ctx):
    from engine.strategies.data_parallel_executors import DataParallelSteps
    return DataParallelSteps(ctx)
