"""ddp: DistributedDataParallel, one process per device (gloo on CPU devices, NCCL on GPUs).

Each rank takes its torch.chunk of the global batch, as DataParallel would
scatter it, so per-device batch sizes match the data-parallel tutorial's printout. Its loss is
scaled by its share of the batch so that DDP's gradient averaging gives exactly
the full batch's mean-loss gradient, even when chunks are uneven or empty.
"""
from __future__ import annotations

from engine.problems import Problem
from engine.strategies.base import replica_device_problems
from engine.strategies.strategy import Strategy


class Ddp(Strategy):
    rank_imports = ("engine.strategies.ddp_executor",)
    name = "ddp"
    description = ("DistributedDataParallel: one process per device, each on its slice of the batch, gradients "
                   "all-reduced (timed as communication).")
    data_parallel = True
    needs_process_group = True  # DDP needs a process group even on one device

    def world_size(self, config, devices) -> int:
        return len(devices)

    def check(self, config, devices, n_blocks) -> list[Problem]:
        return replica_device_problems(self.name, devices, "one per process")

    def build(self, ctx):
        from engine.strategies.ddp_executor import Ddp as DdpExecutor
        return DdpExecutor(ctx)
