"""The executor behind ddp: DistributedDataParallel on this rank's device.

The gradient all-reduce is timed as "communication" by wrapping torch's own
default hook (``allreduce_hook``, what DDP does without one): from the bucket's
launch to the all-reduce's completion, on gloo and on NCCL (there through CUDA
events on the stream that waits for it), and each bucket's bytes counted
(engine.measure.communication: the reducer calls no Python op a dispatch mode could see). The worker's merge then cuts each rank's
share of a collective that came before the last rank arrived off as "wait"
(engine.record.step_merger). ``backward`` ends where the last bucket is launched: after it,
the rank waits for the all-reduce, then copies the reduced buckets into the
gradients (timed as "transfer").
"""
from __future__ import annotations

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from engine.measure.tensor_memory import Placement
from engine.precision import make_optimizer
from engine.strategies.base import (
    Executor,
    RankContext,
    StepResult,
    place_on,
    replica_batch,
    replica_loss,
    replica_rows,
)


class Ddp(Executor):
    def __init__(self, ctx: RankContext):
        self.rank, self.world = ctx.rank, ctx.world_size
        self.device = ctx.devices[ctx.rank]
        self.timer = ctx.timer
        self.comm = ctx.comm
        self.loss_fn = ctx.spec.loss_fn
        self.module = ctx.spec.whole().to(self.device.torch_device)
        ids = [self.device.index] if self.device.kind == "cuda" else None
        # Any module may hold parameters its forward never uses (an auxiliary head), which DDP must be told of.
        self.model = DistributedDataParallel(self.module, device_ids=ids, find_unused_parameters=ctx.spec.traced)
        self.model.register_comm_hook(dist.group.WORLD, self._timed_allreduce)
        self.optimizer = make_optimizer(self.model.parameters(), ctx.config)
        self._last_launch = None  # mark of the step's last bucket launch
        self._last_done = None    # and of the last all-reduce's end

    def _timed_allreduce(self, group, bucket):
        timer, dev = self.timer, self.device
        launched = timer.mark(dev)
        self._last_launch = launched
        buffer = bucket.buffer()
        nbytes = buffer.numel() * buffer.element_size()

        def done(future):
            ended = timer.mark(dev)
            timer.between(dev, "communication", launched, ended)
            self.comm.record(dev, "all-reduce", nbytes, launched, ended)
            self._last_done = ended  # buckets complete in launch order (one gloo or NCCL queue)
            return future.value()
        return allreduce_hook(group, bucket).then(done)

    def place_batch(self, inputs, targets):
        return place_on(self.timer, self.device, inputs, targets)

    def input_rows(self, batch_size: int) -> range:
        return replica_rows(batch_size, self.world, self.rank)

    def step(self, inputs, targets) -> StepResult:
        dev, timer = self.device, self.timer
        total = int(inputs.shape[0])
        x, y, split = replica_batch(inputs, targets, self.world, self.rank)
        mine = int(x.shape[0])
        self.optimizer.zero_grad(set_to_none=True)
        with timer.span(dev, "forward"):
            local, scaled = replica_loss(self.loss_fn, self.model(x), y, total, self.world)
        self._last_launch = self._last_done = None
        started = timer.mark(dev)
        scaled.backward()
        returned = timer.mark(dev)
        # Compute ends where the last bucket launches; then backward() waits for the all-reduce, and
        # copies the reduced buckets into the parameters' gradients.
        timer.between(dev, "backward", started, self._last_launch if self._last_launch is not None else returned)
        if self._last_done is not None:
            timer.between(dev, "transfer", self._last_done, returned)
        with timer.span(dev, "optimizer"):
            self.optimizer.step()
        part = float(local.detach()) * mine / total if mine else 0.0
        return StepResult(loss_part=part, samples=mine, batch_split=split if self.rank == 0 else None)

    def reported_parameters(self) -> list | None:
        return list(self.module.parameters()) if self.rank == 0 else None

    def placements(self) -> list[Placement]:
        return [Placement(self.device, self.module, self.optimizer)]
