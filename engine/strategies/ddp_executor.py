"""The executor behind ddp: DistributedDataParallel on this rank's device."""
from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel

from engine.strategies.base import Executor, RankContext, StepResult, params_sq, sgd


class Ddp(Executor):
    def __init__(self, ctx: RankContext):
        self.rank, self.world = ctx.rank, ctx.world_size
        self.device = ctx.devices[ctx.rank]
        self.timer = ctx.timer
        self.loss_fn = ctx.spec.loss_fn
        self.module = ctx.spec.sequential().to(self.device.torch_device)
        ids = [self.device.index] if self.device.kind == "cuda" else None
        self.model = DistributedDataParallel(self.module, device_ids=ids)
        self.optimizer = sgd(self.model.parameters(), ctx.config)

    def step(self, inputs, targets) -> StepResult:
        dev, timer = self.device, self.timer
        total = int(inputs.shape[0])
        chunks_x, chunks_y = inputs.chunk(self.world), targets.chunk(self.world)
        split = [len(c) for c in chunks_x] + [0] * (self.world - len(chunks_x))
        if self.rank < len(chunks_x):
            x, y = chunks_x[self.rank], chunks_y[self.rank]
        else:  # a small last batch leaves this device without samples
            x, y = inputs[:0], targets[:0]
        mine = int(x.shape[0])
        if dev.kind == "cuda":
            with timer.span(dev, "transfer"):
                x, y = x.to(dev.torch_device), y.to(dev.torch_device)
        self.optimizer.zero_grad(set_to_none=True)
        with timer.span(dev, "forward"):
            out = self.model(x)
            if mine:
                local = self.loss_fn(out, y)
                # DDP averages gradients over ranks: weight by this rank's share.
                scaled = local * (mine * self.world / total)
            else:
                local = out.sum() * 0.0
                scaled = local
        with timer.span(dev, "backward"):  # includes the gradient all-reduce DDP overlaps with it
            scaled.backward()
        with timer.span(dev, "optimizer"):
            self.optimizer.step()
        part = float(local.detach()) * mine / total if mine else 0.0
        return StepResult(loss_part=part, samples=mine, batch_split=split if self.rank == 0 else None)

    def param_sq(self) -> float | None:
        return params_sq(self.module) if self.rank == 0 else None
