"""Instruments: an unmodified training script's steps, timed from torch's public hooks.

Installed in a rank process before the script's first line (engine/watch/bootstrap.py):
- **forward**: the outermost module call (global forward pre- and post-hooks: a DDP
  wrapper's call, or a pipeline stage's per micro-batch; a loss module's call too),
  not a forward that activation checkpointing reruns inside a backward;
- **backward**: ``torch.autograd.backward``, which ``Tensor.backward`` and torch's
  pipelining schedules call; the loss is the scalar it is given;
- **optimizer**: the global optimizer step pre- and post-hooks; the first optimizer that
  steps ends each step (a script with several steps each of them inside that step);
- **communication**: DistributedDataParallel's all-reduce, through a comm hook set as each
  DDP module is built (the reducer's own arithmetic: times 1/world, then summed), from
  the bucket's launch to its completion, overlapping the backward it runs under; and every
  collective called through ``torch.distributed`` (``COLLECTIVES``: FSDP2's all-gathers and
  reduce-scatters, a script's own all-reduce), from its call to its completion (an
  ``async_op`` one's Work future), the outermost call only (an object collective calls others).
  A barrier is ``wait``. Tensor parallel's functional collectives are not timed;
- **wait**: a pipeline stage waiting for its peer's activation or gradient (torch's
  pipelining schedules wait on their sends and receives in one module-level function,
  wrapped here as the engine's own pipeline wraps it: engine/strategies/scheduled_stages.py);
- **data**: from a step's end to the next step's first forward (the input pipeline, and
  whatever else the script does between steps), less any wait for a peer in it.
The samples of a step are the first dimension of the first tensor argument of the module
the script called first, summed over its calls in the step (a pipeline's micro-batches).
What the hooks cannot know the script may say (splitscope/watch.py: ``watch.step(samples=,
loss=)`` for the step under way, ``with watch.phase(kind):``; a script that times its own
``data`` replaces the guess above).
Host clocks: this is for CPU virtual devices (a GPU's work would need CUDA events).
"""
from __future__ import annotations

import functools
import threading
import time
from typing import Callable

from engine.record.rank_events import StepReport


COLLECTIVES = ("all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_single",
               "all_gather_coalesced", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor",
               "reduce_scatter_single", "broadcast", "broadcast_object_list", "reduce", "all_to_all",
               "all_to_all_single", "gather", "scatter", "barrier", "monitored_barrier")
"""The ``torch.distributed`` functions timed as communication (the barriers as wait)."""


class WatchEnded(BaseException):
    """Raised from the optimizer's post-hook once the watch has its steps: a BaseException, so the script's own
    ``except Exception`` does not swallow it."""


class Instruments:
    def __init__(self, device: str, emit: Callable[[StepReport], None], steps: int | None = None,
                 on_training: Callable[[], None] | None = None):
        """``on_training``: called once, at the script's first forward (the worker's start-up allowance covers
        everything before it: imports, datasets, the rendezvous)."""
        self.device = device
        self.emit = emit
        self.max_steps = steps
        self._on_training = on_training
        self._stages: list[int] = []       # the torch.distributed.pipelining stages this rank holds
        self.step = 0
        self._lock = threading.Lock()      # a DDP bucket completes on gloo's thread
        self._intervals: list[list] = []
        self._depth = 0                    # module calls open on the main thread
        self._skipped: set[int] = set()    # parameterless calls let through before a step's first forward
        self._in_backward = 0
        self._forward_start: float | None = None
        self._optimizer_start: float | None = None
        self._step_start: float | None = None   # the previous step's end; None before the first forward
        self._waited_until = 0.0           # the end of the last wait for a peer
        self._forwarded = False            # this step has had its first forward
        self._counted = None               # the module whose calls count the samples (the first one called)
        self._samples = 0
        self._losses: list = []
        self._declared: dict = {}          # the step's samples and loss as the script said them (watch.step)
        self._own_data = False             # the script times its data itself (watch.phase("data"))
        self._stepper = None               # the optimizer whose step ends a step
        self._backward_seen = False        # this step has had a backward
        self.forward_steps = False         # no optimizer steps: each outermost forward was a step
        self._handles: list = []
        self._calling = threading.local()  # inside a timed collective: the ones it calls are its own
        self._undo: list[Callable[[], None]] = []

    # ---- installing ------------------------------------------------------------------
    def install(self) -> None:
        import torch
        import torch.autograd
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim
        self._handles += [nn_module.register_module_forward_pre_hook(self._before_forward),
                          # also after a forward that raised (a script may catch it and go on)
                          nn_module.register_module_forward_hook(self._after_forward, always_call=True),
                          optim.register_optimizer_step_pre_hook(self._before_optimizer),
                          optim.register_optimizer_step_post_hook(self._after_optimizer)]
        original_backward = torch.autograd.backward

        def backward(tensors, *args, **kwargs):
            self._in_backward += 1
            t0 = time.perf_counter()
            try:
                return original_backward(tensors, *args, **kwargs)
            finally:
                if self._in_backward == 1:   # reentrant checkpointing calls it again inside: counted once
                    self._add("backward", t0, time.perf_counter())
                    self._backward_seen = True
                self._in_backward -= 1
                # the loss: a scalar, alone or as a pipeline's last stage hands it over (a one-tensor sequence)
                alone = tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else tensors
                if isinstance(alone, torch.Tensor) and alone.dim() == 0:
                    self._losses.append(alone.detach())
        torch.autograd.backward = backward
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))
        self._time_collectives()
        self._time_ddp_buckets()
        self._time_peer_waits()
        self._note_pipeline_stages()

    def _note_pipeline_stages(self) -> None:
        """A pipeline's stages: only the first stage's inputs are the step's samples (a later stage's module
        gets activations, a micro-batch each)."""
        from torch.distributed.pipelining import stage
        original_init = stage._PipelineStageBase.__init__
        stages = self._stages

        @functools.wraps(original_init)
        def init(pipeline_stage, *args, **kwargs):
            original_init(pipeline_stage, *args, **kwargs)
            stages.append(pipeline_stage.stage_index)
        stage._PipelineStageBase.__init__ = init
        self._undo.append(lambda: setattr(stage._PipelineStageBase, "__init__", original_init))

    def _time_peer_waits(self) -> None:
        from torch.distributed.pipelining import schedules
        original = schedules._wait_batch_p2p

        def timed_wait(work):
            t0 = time.perf_counter()
            try:
                return original(work)
            finally:
                self._waited_until = time.perf_counter()
                self._add("wait", t0, self._waited_until)
        schedules._wait_batch_p2p = timed_wait
        self._undo.append(lambda: setattr(schedules, "_wait_batch_p2p", original))

    def _time_collectives(self) -> None:
        import torch.distributed as dist
        for name in COLLECTIVES:
            original = getattr(dist, name, None)
            if original is not None:
                setattr(dist, name, self._timed_collective(original, "wait" if "barrier" in name else "communication"))
                self._undo.append(functools.partial(setattr, dist, name, original))

    def _timed_collective(self, original, kind: str):
        import torch.distributed as dist

        @functools.wraps(original)
        def timed(*args, **kwargs):
            if getattr(self._calling, "depth", 0):
                return original(*args, **kwargs)
            self._calling.depth = 1
            t0 = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                self._calling.depth = 0
            if isinstance(result, dist.Work):
                try:
                    result.get_future().then(lambda future: self._add(kind, t0, time.perf_counter()))
                    return result
                except RuntimeError:   # a backend without futures: timed to its return
                    pass
            end = time.perf_counter()
            if self._step_start is None:   # before the first forward (a start-up barrier): the first step's
                self._step_start = t0
            self._add(kind, t0, end)
            if not self._depth and not self._in_backward:   # between steps: not the input pipeline's time
                self._waited_until = end
            return result
        return timed

    def _time_ddp_buckets(self) -> None:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        original_init = DistributedDataParallel.__init__
        instruments = self
        from torch.distributed.distributed_c10d import all_reduce   # untimed: torch.distributed's name is wrapped

        def timed_allreduce(process_group, bucket):
            group = process_group if process_group is not None else dist.group.WORLD
            tensor = bucket.buffer()
            tensor.mul_(1.0 / group.size())   # as DDP scales a bucket without a hook: the same arithmetic
            t0 = time.perf_counter()

            def done(future):
                instruments._add("communication", t0, time.perf_counter())
                return future.value()[0]
            return all_reduce(tensor, group=group, async_op=True).get_future().then(done)

        def time_buckets(ddp, args) -> None:
            """At the module's first forward, after the script had its chance to set a comm hook of its own
            (fp16 compression, PowerSGD; DDP takes one): the timed all-reduce only where none is set."""
            ddp._splitscope_first_call.remove()
            if getattr(ddp, "_comm_hooks", None):
                return
            try:
                ddp.register_comm_hook(ddp.process_group, timed_allreduce)
            except RuntimeError:   # a built-in hook (mixed precision) took the place: its all-reduce goes untimed
                pass

        @functools.wraps(original_init)
        def init(ddp, *args, **kwargs):
            original_init(ddp, *args, **kwargs)
            ddp._splitscope_first_call = ddp.register_forward_pre_hook(time_buckets)
        DistributedDataParallel.__init__ = init
        self._undo.append(lambda: setattr(DistributedDataParallel, "__init__", original_init))

    def uninstall(self) -> None:
        for handle in self._handles:
            handle.remove()
        for undo in reversed(self._undo):
            undo()
        self._handles, self._undo = [], []

    # ---- the hooks -------------------------------------------------------------------
    def _add(self, kind: str, t0: float, t1: float) -> None:
        with self._lock:
            self._intervals.append([kind, t0, t1])

    def training(self) -> None:
        """The script trains (its first forward): ``on_training``, once."""
        if self._on_training is not None:
            callback, self._on_training = self._on_training, None
            callback()

    # ---- what the script says (splitscope/watch.py) ------------------------------------
    def declare(self, samples: int | None = None, loss: float | None = None) -> None:
        if samples is not None:
            self._declared["samples"] = samples
        if loss is not None:
            self._declared["loss"] = loss

    def declare_phase(self, kind: str, t0: float, t1: float) -> None:
        if kind == "data":
            self._own_data = True
        if self._step_start is None:   # the first step starts at whatever the script does first
            self._step_start = t0
        self._add(kind, t0, t1)

    def _before_forward(self, module, args) -> None:
        if threading.current_thread() is not threading.main_thread() or self._in_backward:
            return
        if not self._depth and not self._forwarded and next(iter(module.parameters()), None) is None:
            # a module without parameters before the step's model (torchvision's transforms in the rank's own
            # DataLoader): the input pipeline's work, not a forward
            self._skipped.add(id(module))
            return
        self._depth += 1
        if self._depth > 1:
            return
        now = time.perf_counter()
        self.training()
        if self._stepper is None and self._forwarded and not self._backward_seen and module is self._counted:
            # The step's model called again with no optimizer ever stepped and no backward since: an inference or
            # evaluation script, whose steps are its model's calls (a training script's first step has its
            # backward; its loss module, called after the model, is not the model).
            self.forward_steps = True
            self._end_step(now)
        if not self._forwarded:
            self._forwarded = True
            if self._step_start is None:
                self._step_start = now                     # the first step starts at its first forward
            elif not self._own_data and now > self._step_start:
                # waiting for (or making) the next batch; a wait for a peer's activation is the peer's
                self._add("data", max(self._step_start, min(self._waited_until, now)), now)
        if self._counted is None:
            self._counted = module
        if module is self._counted:
            first = next((a for a in args if hasattr(a, "shape") and len(a.shape) > 0), None)
            self._samples += int(first.shape[0]) if first is not None else 0
        self._forward_start = now

    def _after_forward(self, module, args, output) -> None:
        if threading.current_thread() is not threading.main_thread() or self._in_backward:
            return
        if not self._depth and id(module) in self._skipped:
            self._skipped.discard(id(module))
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self._forward_start is not None:
            self._add("forward", self._forward_start, time.perf_counter())
            self._forward_start = None

    def _before_optimizer(self, optimizer, args, kwargs) -> None:
        self._optimizer_start = time.perf_counter()

    def _after_optimizer(self, optimizer, args, kwargs) -> None:
        end = time.perf_counter()
        if self._optimizer_start is not None:
            self._add("optimizer", self._optimizer_start, end)
        if self._stepper is None:
            self._stepper = optimizer
        if optimizer is self._stepper:
            self._end_step(end)

    def finish(self) -> None:
        """The script ended: an inference script's last forward is its last step."""
        if self._stepper is None and self._forwarded and not self._backward_seen:
            self.forward_steps = True
            self._end_step(time.perf_counter())

    def note(self) -> str | None:
        """What a reader must know of this rank's steps."""
        return ("no optimizer stepped: each of the script's outermost forward calls is a step (inference or "
                "evaluation)") if self.forward_steps and self._stepper is None else None

    def _end_step(self, end: float) -> None:
        with self._lock:
            intervals, self._intervals = self._intervals, []
        losses, self._losses = self._losses, []
        declared, self._declared = self._declared, {}
        loss = sum(float(x) for x in losses) / len(losses) if losses else None
        start = self._step_start if self._step_start is not None else end
        samples = self._samples if not self._stages or 0 in self._stages else 0   # a later stage's: activations
        self.emit(StepReport(self.step, start, end, {self.device: intervals}, declared.get("loss", loss),
                             declared.get("samples", samples)))
        self.step += 1
        self._step_start, self._forwarded, self._samples, self._backward_seen = end, False, 0, False
        if self.max_steps is not None and self.step >= self.max_steps:
            raise WatchEnded(f"{self.step} steps watched")
