"""ddp: DistributedDataParallel, one process per device (gloo on CPU devices, NCCL on GPUs).

Each rank takes its torch.chunk of the global batch, as DataParallel would
scatter it, so per-device batch sizes match the seed's printout. Its loss is
scaled by its share of the batch so that DDP's gradient averaging gives exactly
the full batch's mean-loss gradient, even when chunks are uneven or empty.
"""
from __future__ import annotations

from engine.problems import Problem
from engine.strategies.base import replica_device_problems


def world_size(config, devices) -> int:
    return len(devices)


def check(config, devices, n_blocks) -> list[Problem]:
    return replica_device_problems("ddp", devices, "one per process")


def build(ctx):
    from engine.strategies.ddp_executor import Ddp
    return Ddp(ctx)
