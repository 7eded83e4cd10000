"""ddp: DistributedDataParallel, one process per device (gloo on CPU devices, NCCL on GPUs).

Each rank takes its torch.chunk of the global batch, as DataParallel would
scatter it, so per-device batch sizes match the seed's printout. Its loss is
scaled by its share of the batch so that DDP's gradient averaging gives exactly
the full batch's mean-loss gradient, even when chunks are uneven or empty.
"""
from __future__ import annotations

from engine.config import Problem


def world_size(config, devices) -> int:
    return len(devices)


def check(config, devices, n_blocks) -> list[Problem]:
    kinds = {d.kind for d in devices}
    if len(kinds) > 1:
        return [Problem("devices", "ddp needs devices of one kind (all cpu or all cuda), "
                                   f"got {', '.join(d.name for d in devices)}")]
    cuda = [d.index for d in devices if d.kind == "cuda"]
    if len(set(cuda)) != len(cuda):
        return [Problem("devices", "ddp needs distinct GPUs, one per process")]
    return []


def build(ctx):
    from engine.strategies.ddp_executor import Ddp
    return Ddp(ctx)
