"""Stages in one process, moved between devices with .to(): the tutorials' code shape.

Used when a stage is on a GPU that another stage shares, or when CPU and GPU
mix (``--devices cpu,cuda:0``). Each stage's input is cut from the autograd graph
so that each stage's backward runs, and is timed, on its own device; the
gradient is then handed back by hand, which computes the same gradients as one
backward through the whole chain. With M > 1 micro-batches this is the
tutorial's split-size loop: while a GPU works on one micro-batch the next is
already queued on the previous stage.
"""
from __future__ import annotations

import torch

from engine.measure.tensor_memory import Placement
from engine.precision import make_optimizer
from engine.strategies.base import Executor, RankContext, StepResult, place_on, stage_bounds


class InProcessStages(Executor):
    def __init__(self, ctx: RankContext, micro_batches: int):
        self.devices = ctx.devices
        self.timer = ctx.timer
        self.micro_batches = micro_batches
        self.loss_fn = ctx.spec.loss_fn
        bounds = stage_bounds(ctx.split, len(ctx.spec.blocks))
        self.stages = [ctx.spec.sequential(a, b).to(d.torch_device)
                       for (a, b), d in zip(bounds, self.devices, strict=True)]
        # One optimizer per stage, so each stage's update is timed on its own device (SGD's and
        # AdamW's updates are per parameter: the same as one optimizer over all of them).
        # A stage without parameters (a lone ReLU) has none.
        self.optimizers = [(optimizer, dev) for stage, dev in zip(self.stages, self.devices, strict=True)
                           if (optimizer := make_optimizer(stage.parameters(), ctx.config)) is not None]

    def place_batch(self, inputs, targets):
        """Inputs where the first stage reads them, targets where the last stage computes the loss."""
        return (place_on(self.timer, self.devices[0], inputs)[0],
                place_on(self.timer, self.devices[-1], targets)[0])

    def step(self, inputs, targets) -> StepResult:
        timer, m = self.timer, self.micro_batches
        for optimizer, _ in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        # Forward every micro-batch through every stage, keeping each stage's cut input and output.
        saved: list[list[tuple[torch.Tensor, torch.Tensor]]] = []
        losses = []
        for x, y in zip(inputs.chunk(m), targets.chunk(m), strict=True):
            h, per_stage = x, []
            for k, (stage, dev) in enumerate(zip(self.stages, self.devices, strict=True)):
                if k:
                    h = move_between(self.timer, h, self.devices[k - 1], dev)
                # The model's input needs no gradient (as on one device): stage 0 skips computing it.
                cut = h.detach().requires_grad_(h.is_floating_point() and k > 0)
                with timer.span(dev, "forward"):
                    h = stage(cut)
                per_stage.append((cut, h))
            last = self.devices[-1]
            with timer.span(last, "forward"):
                loss = self.loss_fn(h, y) / m
            losses.append(loss)
            saved.append(per_stage)
        # Backward, last stage first, handing each stage's input gradient to the stage before.
        for loss, per_stage in zip(losses, saved, strict=True):
            grad = None
            for k in range(len(self.stages) - 1, -1, -1):
                cut, out = per_stage[k]
                dev = self.devices[k]
                with timer.span(dev, "backward"):
                    if grad is None:
                        loss.backward()
                    elif out.requires_grad:  # not a first stage without parameters
                        out.backward(grad)
                if k > 0:
                    grad = move_between(self.timer, cut.grad, dev, self.devices[k - 1])
        for optimizer, dev in self.optimizers:
            with timer.span(dev, "optimizer"):
                optimizer.step()
        total = float(sum(l.detach().float().cpu() for l in losses))
        return StepResult(loss_part=total, samples=int(inputs.shape[0]))

    def reported_parameters(self) -> list:
        return [p for stage in self.stages for p in stage.parameters()]

    def placements(self) -> list[Placement]:
        optimizers = {dev.name: optimizer for optimizer, dev in self.optimizers}
        return [Placement(d, stage, optimizers.get(d.name)) for stage, d in zip(self.stages, self.devices, strict=True)]


def move_between(timer, tensor: torch.Tensor, src, dst) -> torch.Tensor:
    """Copy from stage device ``src`` to ``dst``, timed as a transfer on the GPU that does the copy.

    A copy between GPUs runs on the source GPU's stream (the destination only
    waits for it), a copy from the host on the destination's: a span on the
    receiving GPU would also cover the sender's queued work.
    """
    if src == dst:
        return tensor
    on = src if src.kind == "cuda" else dst
    with timer.span(on, "transfer"):
        # Into host memory the copy must have landed before the CPU stage reads it:
        # non_blocking there returns a pinned tensor still being written.
        return tensor.to(dst.torch_device, non_blocking=dst.kind == "cuda")
