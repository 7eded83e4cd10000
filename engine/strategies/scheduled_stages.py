"""Stages in their own processes, driven by torch.distributed.pipelining schedules.

Used by ``pipeline`` (GPipe or 1F1B over M micro-batches) and by
``model-parallel`` on CPU virtual devices (GPipe over one micro-batch is exactly
the naive split: one whole batch passes stage by stage). A chain of blocks is
sliced into stages; any other module is cut by the pipelining tracer
(engine.models.tracing), each rank tracing its own copy of the model. Compute is timed by
overriding the stage's forward/backward of one chunk; time blocked on a peer's
activation or gradient is recorded as "wait", which is not busy.
"""
from __future__ import annotations

import time

import torch
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.pipelining import schedules as _schedules

from engine.models import tracing
from engine.strategies.base import (Executor, RankContext, StepResult, place_on, stage_bounds,
                                    stage_sgd)
from engine.tensor_memory import Placement

SCHEDULE_CLASSES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


def _time_chunks(stage, timer, device) -> None:
    """Time each chunk's forward and backward on the stage's device (a block stage and a traced stage
    are different classes: their instance methods are wrapped alike)."""
    for method, kind in (("forward_one_chunk", "forward"), ("backward_one_chunk", "backward")):
        original = getattr(stage, method)

        def timed(*args, _original=original, _kind=kind, **kwargs):
            with timer.span(device, _kind):
                return _original(*args, **kwargs)
        setattr(stage, method, timed)


def _time_peer_waits(timer, device) -> None:
    """Record every wait for a peer's send/recv as a "wait" interval.

    The schedules call the module-level ``_wait_batch_p2p``; this rank process
    runs exactly one schedule, so wrapping it here is contained.
    """
    original = getattr(_schedules._wait_batch_p2p, "__wrapped__", _schedules._wait_batch_p2p)

    def timed_wait(work):
        t0 = time.perf_counter()
        original(work)
        timer.add(device.name, "wait", t0, time.perf_counter())
    timed_wait.__wrapped__ = original
    _schedules._wait_batch_p2p = timed_wait


class ScheduledStages(Executor):
    def __init__(self, ctx: RankContext, micro_batches: int, schedule: str):
        self.rank, self.world = ctx.rank, ctx.world_size
        self.first, self.last = self.rank == 0, self.rank == self.world - 1
        self.device = ctx.devices[self.rank]
        self.timer = ctx.timer
        torch_device = torch.device(self.device.torch_device)
        if ctx.spec.traced:
            pipe = tracing.cut(ctx.spec, ctx.split, self._example_micro_batch(ctx, micro_batches))
            self.module = pipe.get_stage_module(self.rank).to(torch_device)
            stage = pipe.build_stage(self.rank, torch_device)
            tracing.run_on_copied_inputs(stage)
        else:
            start, stop = stage_bounds(ctx.split, len(ctx.spec.blocks))[self.rank]
            self.module = ctx.spec.sequential(start, stop).to(torch_device)
            stage = PipelineStage(self.module, self.rank, self.world, torch_device)
        _time_chunks(stage, self.timer, self.device)
        spec_loss = ctx.spec.loss_fn

        def timed_loss(output, target):
            with self.timer.span(self.device, "forward"):
                return spec_loss(output, target)
        # scale_grads: each micro-batch's mean loss is divided by M, so the summed
        # gradient is the whole batch's mean-loss gradient, as on one device.
        self.schedule = SCHEDULE_CLASSES[schedule](stage, n_microbatches=micro_batches, loss_fn=timed_loss,
                                                   scale_grads=True)
        self.optimizer = stage_sgd(self.module, ctx.config)
        _time_peer_waits(self.timer, self.device)

    @staticmethod
    def _example_micro_batch(ctx: RankContext, micro_batches: int):
        """A micro-batch of the shape the stages will see: the tracer specializes on it."""
        with torch.device("cpu"):
            inputs, _ = ctx.spec.data.sample(ctx.config.effective_batch_size)
        return inputs[: inputs.shape[0] // micro_batches]

    def place_batch(self, inputs, targets):
        """The first stage reads the inputs, the last the targets; a middle stage neither."""
        placed_inputs = place_on(self.timer, self.device, inputs)[0] if self.first else None
        placed_targets = place_on(self.timer, self.device, targets)[0] if self.last else None
        return placed_inputs, placed_targets

    def step(self, inputs, targets) -> StepResult:
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        losses: list = []
        if self.first:
            self.schedule.step(inputs, return_outputs=False)
        elif self.last:
            self.schedule.step(target=targets, losses=losses, return_outputs=False)
        else:
            self.schedule.step(return_outputs=False)
        if self.optimizer is not None:
            with self.timer.span(self.device, "optimizer"):
                self.optimizer.step()
        loss = float(torch.stack([l.detach().float().cpu() for l in losses]).mean()) if losses else None
        return StepResult(loss_part=loss, samples=int(inputs.shape[0]) if self.first else 0)

    def reported_parameters(self) -> list:
        return list(self.module.parameters())

    def placements(self) -> list[Placement]:
        return [Placement(self.device, self.module, self.optimizer)]
