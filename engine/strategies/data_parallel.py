"""data-parallel: nn.DataParallel on GPUs; the same steps with a thread per CPU virtual device.

DataParallel's steps, each timed on the device that does it: scatter the batch
(torch.chunk), replicate the model from device 0, forward in parallel, gather the
outputs on device 0, compute the loss there, backward in parallel, reduce the
gradients to device 0, step the optimizer there. Device 0's extra work (gather,
loss, reduce, optimizer) is what this strategy makes visible.
"""
from __future__ import annotations

from engine.config import Problem
from engine.strategies.base import replica_device_problems


def world_size(config, devices) -> int:
    return 1


def check(config, devices, n_blocks) -> list[Problem]:
    return replica_device_problems("data-parallel", devices, "one replica per GPU")


def build(ctx):
    from engine.strategies.data_parallel_executors import CudaDataParallel, ThreadedDataParallel
    if ctx.devices[0].kind == "cuda":
        return CudaDataParallel(ctx)
    return ThreadedDataParallel(ctx)
