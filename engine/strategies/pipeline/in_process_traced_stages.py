"""A traced model's stages in one process, moved between devices: the tutorials' code shape for any module.

Used where ``InProcessStages`` serves a chain of blocks (a GPU shared by stages,
CPU and GPU mixed, the naive split on GPUs) when the model is any other module:
the pipelining tracer cuts it (engine.models.tracing) and engine.models.traced_chain
runs the stages in order, each tensor crossing to a later stage copied to its
device (timed as "transfer" on the GPU doing the copy) and cut from the graph, so
each stage's forward and backward run, and are timed, on their own device. With
M > 1 micro-batches every micro-batch goes forward first, then every backward
(GPipe order), as the block version does.
"""
from __future__ import annotations

import torch

from engine.models import effective_batch_size, traced_chain, tracing
from engine.precision import make_optimizer
from engine.strategies.base import RankContext, StepResult
from engine.strategies.pipeline.in_process_stages import InProcessStages, move_between


class InProcessTracedStages(InProcessStages):
    """The block version's placement of the batch, reporting and tensor memory; its own stages and step."""

    def __init__(self, ctx: RankContext, micro_batches: int):
        self.devices = ctx.devices
        self.timer = ctx.timer
        self.micro_batches = micro_batches
        self.loss_fn = ctx.spec.loss_fn
        micro = effective_batch_size(ctx.config) // micro_batches  # the tracer specializes on the shape
        self.pipe = tracing.cut(ctx.spec, ctx.split, ctx.spec.data.example_inputs(micro))
        self.stages = [tracing.stage_on(self.pipe, k, d.torch_device) for k, d in enumerate(self.devices)]
        self.optimizers = [(optimizer, dev) for stage, dev in zip(self.stages, self.devices, strict=True)
                           if (optimizer := make_optimizer(stage.parameters(), ctx.config)) is not None]

    def _place(self, source_stage: int | None, k: int, tensor: torch.Tensor) -> torch.Tensor:
        # The model's input is where place_batch put it: on the first stage's device.
        return move_between(self.timer, tensor, self.devices[source_stage or 0], self.devices[k])

    def _run(self, k: int, call):
        with self.timer.span(self.devices[k], "forward"):
            return call()

    def _backward(self, k: int, call) -> None:
        with self.timer.span(self.devices[k], "backward"):
            call()

    def _hand_back(self, k: int, cut: traced_chain.Cut) -> torch.Tensor:
        return move_between(self.timer, cut.leaf.grad, self.devices[k], self.devices[cut.source_stage])

    def step(self, inputs, targets) -> StepResult:
        m, last = self.micro_batches, self.devices[-1]
        for optimizer, _ in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        passes = []
        for x, y in zip(inputs.chunk(m), targets.chunk(m), strict=True):
            runs = traced_chain.run_each_stage(self.pipe, x, self._run, self._place)
            with self.timer.span(last, "forward"):
                loss = self.loss_fn(runs[-1].output, y) / m
            passes.append((runs, loss))
        for runs, loss in passes:
            traced_chain.backward_each_stage(runs, loss, self._backward, self._hand_back)
        for optimizer, dev in self.optimizers:
            with self.timer.span(dev, "optimizer"):
                optimizer.step()
        total = float(sum(loss.detach().float().cpu() for _, loss in passes))
        return StepResult(loss_part=total, samples=int(inputs.shape[0]))
