"""Stages in their own processes, driven by torch.distributed.pipelining schedules.

Used by ``pipeline`` (any schedule of engine.strategies.pipeline.schedules over M
micro-batches; the interleaved, looped and zero-bubble ones run V stages per
rank, placed in a loop or a V) and by ``model-parallel`` on CPU virtual devices
(GPipe over one micro-batch is exactly the naive split: one whole batch passes
stage by stage). A chain of blocks is
sliced into stages; any other module is cut by the pipelining tracer
(engine.models.tracing), each rank tracing its own copy of the model. Compute is timed by
overriding the stage's forward/backward of one chunk; time blocked on a peer's
activation or gradient is recorded as "wait", which is not busy.
"""
from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed.pipelining
from torch.distributed.pipelining import PipelineStage, schedules as _schedules

from engine.measure.communication import collective_meter
from engine.measure.counted_step import counted_step
from engine.measure.profiling import profiled_steps
from engine.measure.tensor_memory import Placement
from engine.models import effective_batch_size, tracing
from engine.precision import autocast, make_optimizer
from engine.strategies.base import Executor, RankContext, StepResult, place_on, stage_bounds
from engine.strategies.pipeline.exchange_probe import two_way_extra_s
from engine.strategies.pipeline.schedule_actions import tick_plan
from engine.strategies.pipeline.schedules import SCHEDULE_INFO
from engine.strategies.pipeline.split_backward_probe import LastInputs, split_backward_extra_s


def _time_chunks(stage, timer, device) -> None:
    """Time each chunk's forward and backward on the stage's device (a block stage and a traced stage
    are different classes: their instance methods are wrapped alike). A zero-bubble schedule splits the
    backward: the input gradient (``full_backward=False``) and, later, the weight gradient."""
    forward, backward, weight = stage.forward_one_chunk, stage.backward_one_chunk, stage.backward_weight_one_chunk

    def timed_forward(*args, **kwargs):
        with timer.span(device, "forward"):
            return forward(*args, **kwargs)

    def timed_backward(*args, **kwargs):
        with timer.span(device, "backward" if kwargs.get("full_backward", True) else "backward-input"):
            return backward(*args, **kwargs)

    def timed_weight(*args, **kwargs):
        with timer.span(device, "backward-weight"):
            return weight(*args, **kwargs)
    stage.forward_one_chunk, stage.backward_one_chunk = timed_forward, timed_backward
    stage.backward_weight_one_chunk = timed_weight


def _flag_shape_inference(stages) -> list:
    """A list that is not empty while a stage runs torch's backward metadata inference
    (``_prepare_backward_infra``, once, before the first step's micro-batches)."""
    inferring: list = []
    for stage in stages:
        prepare = getattr(stage, "_prepare_backward_infra", None)
        if prepare is None:   # another torch: its extra loss call, if any, stays timed
            continue

        def flagged(*args, prepare=prepare, **kwargs):
            inferring.append(True)
            try:
                return prepare(*args, **kwargs)
            finally:
                inferring.pop()
        stage._prepare_backward_infra = flagged
    return inferring


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


def _no_warmup_to_itself(stage) -> None:
    """A traced stage (torch's ``_PipelineStage``, not a ``PipelineStage``) warms its neighbours' links up with a
    send and a receive to each (schedules.py ``_warmup_p2p``'s legacy path), its own rank's included: in a V
    (zbv, dualpipev) a rank holds two neighbouring stages, and gloo cannot send to itself ("Pair is not
    connected"). Those two stages exchange nothing over the network in the schedule itself; their warm-up ops to
    this rank are dropped (a send and its receive, both of them here)."""
    import torch.distributed as dist
    own_ops = stage._get_init_p2p_neighbors_ops
    me = dist.get_rank()
    stage._get_init_p2p_neighbors_ops = lambda: [op for op in own_ops() if op.peer != me]


def _outputs_of_their_own(stage) -> None:
    """Make a stage's outputs tensors of their own, not views of another.

    A zero-bubble schedule's input-gradient backward (torch's ``stage_backward_input``) ends by detaching the
    stage's outputs in place, which a view refuses ("Can't detach views in-place"): a stage cut just after a
    flatten (a traced torchvision ResNet cut at ``fc``, or an ``nn.Flatten`` block) hands on a view. Such an
    output is copied (a batch of activations: small beside the stage's work); any other is passed on as it is.
    The last stage's backward starts from the loss, not its outputs: left alone.
    """
    if stage.is_last:
        return
    forward = stage.forward_maybe_with_nosync

    def owned(output):
        return output.clone() if isinstance(output, torch.Tensor) and output._is_view() else output

    def forward_owned(*args, **kwargs):
        output = forward(*args, **kwargs)
        # a tuple or list of outputs (the stage makes a tuple of a list itself); a namedtuple would lose its type
        return tuple(map(owned, output)) if type(output) in (tuple, list) else owned(output)
    stage.forward_maybe_with_nosync = forward_owned


class ScheduledStages(Executor):
    def __init__(self, ctx: RankContext, micro_batches: int, schedule: str):
        self.rank, self.world = ctx.rank, ctx.world_size
        self.device = ctx.devices[self.rank]
        self.timer = ctx.timer
        info = self.schedule_info = SCHEDULE_INFO[schedule]
        self.micro_batches = micro_batches
        per_device = info.per_device(ctx.config.stages_per_device) if info.multi_stage else 1
        n_stages = self.world * per_device
        mine = info.stages_of(self.rank, self.world, per_device)
        # This rank reads the inputs if it runs the first stage, the targets if it runs the last (both, in a V).
        self.first, self.last = 0 in mine, n_stages - 1 in mine
        torch_device = torch.device(self.device.torch_device)
        stages, modules = [], []
        if ctx.spec.traced:
            micro = effective_batch_size(ctx.config) // micro_batches  # the tracer specializes on the shape
            pipe = tracing.cut(ctx.spec, ctx.split, ctx.spec.data.example_inputs(micro))
            for index in mine:
                modules.append(pipe.get_stage_module(index).to(torch_device))
                stages.append(pipe.build_stage(index, torch_device))
                tracing.run_on_copied_inputs(stages[-1])
                _no_warmup_to_itself(stages[-1])
        else:
            bounds = stage_bounds(ctx.split, len(ctx.spec.blocks))
            for index in mine:
                modules.append(ctx.spec.sequential(*bounds[index]).to(torch_device))
                stages.append(PipelineStage(modules[-1], index, n_stages, torch_device))
        for stage in stages:
            if info.splits_backward:
                _outputs_of_their_own(stage)
            _time_chunks(stage, self.timer, self.device)
        # One module holding this rank's stages: its parameters, its optimizer, its tensor memory.
        self.module = modules[0] if len(modules) == 1 else torch.nn.ModuleList(modules)
        spec_loss = self.spec_loss = ctx.spec.loss_fn
        inferring = _flag_shape_inference(stages)
        # The stage modules one by one (what the schedule calls), their stage numbers, and the last step's inputs
        # for the split backward's probe after it (split_backward_extra_s).
        self.stage_indices, self.n_stages, self.modules = mine, n_stages, modules
        self.last_inputs = LastInputs(modules)

        def timed_loss(output, target):
            self.last_inputs.keep_target(target)
            if inferring:
                # torch's backward-shape inference (the first step) calls the loss once more than there are
                # micro-batches: no micro-batch's, so no forward on the timeline (the trace pairs its slices).
                return spec_loss(output, target)
            with self.timer.span(self.device, "forward"):
                return spec_loss(output, target)
        # scale_grads: each micro-batch's mean loss is divided by M, so the summed
        # gradient is the whole batch's mean-loss gradient, as on one device.
        schedule_class = getattr(torch.distributed.pipelining, info.torch_class)
        self.schedule = schedule_class(stages if info.multi_stage else stages[0], n_microbatches=micro_batches,
                                       loss_fn=timed_loss, scale_grads=True)
        self.optimizer = make_optimizer(self.module.parameters(), ctx.config)
        _time_peer_waits(self.timer, self.device)
        # Sends and receives counted on the second step (a warm-up step by default; the first infers the stages'
        # shapes, sending their metadata too) and held for the steps after (CommLedger.hold): a dispatch mode
        # sees every op, which would slow the steps measured, and what a schedule moves repeats step to step.
        self.p2p_meter = collective_meter(self.timer, ctx.comm, self.device)
        self.comm = ctx.comm
        self._steps, self._counted_step = 0, counted_step(ctx.config.steps, profiled_steps(ctx.config))
        self.config = ctx.config

    def schedule_plan(self) -> list[list[str]] | None:
        # The multi-stage schedules run torch's own action list (every rank computes every rank's): rank 0
        # says it. The one-stage-per-device ones run their own loop, which schedule_actions.tick_plan plays out.
        if self.schedule_info.multi_stage:
            order = self.schedule.pipeline_order
            return [[str(action) if action is not None else "" for action in order[rank]] for rank in sorted(order)]
        return tick_plan(self.schedule_info.name, self.world, self.micro_batches)

    def input_rows(self, batch_size: int) -> range:
        return range(batch_size) if self.first else range(0)

    def place_batch(self, inputs, targets):
        """The first stage reads the inputs, the last the targets; a middle stage neither."""
        placed_inputs = place_on(self.timer, self.device, inputs)[0] if self.first else None
        placed_targets = place_on(self.timer, self.device, targets)[0] if self.last else None
        return placed_inputs, placed_targets

    def step(self, inputs, targets) -> StepResult:
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        losses: list = []
        args = (inputs,) if self.first else ()
        ends = {"target": targets, "losses": losses} if self.last else {}
        counted = self._steps == self._counted_step
        self._steps += 1
        self.last_inputs.armed = self._steps == self.config.steps
        with self.p2p_meter if counted else contextlib.nullcontext():
            self.schedule.step(*args, **ends, return_outputs=False)
        if counted:
            self.comm.hold()
        if self.optimizer is not None:
            with self.timer.span(self.device, "optimizer"):
                self.optimizer.step()
        loss = float(torch.stack([l.detach().float().cpu() for l in losses]).mean()) if losses else None
        return StepResult(loss_part=loss, samples=int(inputs.shape[0]) if self.first else 0)

    def reported_parameters(self) -> list:
        return list(self.module.parameters())

    def split_backward_extra_s(self):
        import torch.distributed as dist
        dist.barrier()   # every rank past its last step: no probe lands in a peer's step
        with autocast(self.config, [self.device.kind]):
            return split_backward_extra_s(self.modules, self.stage_indices, self.n_stages - 1, self.last_inputs,
                                          self.spec_loss, torch.device(self.device.torch_device),
                                          budget_s=self.config.hang_timeout_s / 4)

    def two_way_extra_s(self):
        return two_way_extra_s(self.last_inputs, self.stage_indices, torch.device(self.device.torch_device),
                               budget_s=self.config.hang_timeout_s / 8)

    def placements(self) -> list[Placement]:
        # Each stage module on its own: the schedule calls the stages' modules, never a ModuleList holding
        # them, so the activation hooks go on what runs (engine.measure.tensor_memory.ActivationCounter).
        return [Placement(self.device, module, self.optimizer) for module in self.modules]
