"""Instruments: an unmodified training script's steps, timed from torch's public hooks.

Installed in a rank process before the script's first line (engine/watch/bootstrap.py):
- **forward**: the outermost module call (global forward pre- and post-hooks: a DDP
  wrapper's call, or a pipeline stage's per micro-batch; a loss module's call too),
  not a forward that activation checkpointing reruns inside a backward;
- **backward**: ``torch.autograd.backward``, which ``Tensor.backward`` and torch's
  pipelining schedules call; the loss is the scalar it is given;
- **optimizer**: the global optimizer step pre- and post-hooks. A step ends when each of its
  optimizers has stepped once: every optimizer the script has made, on the first step (a GAN's two
  for one batch), then those that stepped in it; one that steps again before the others ends the
  step where it stood at its last optimizer step (a critic stepped more often than its generator).
  Without an optimizer a step ends where the script updated the parameters itself;
- **eval**: an outermost call without gradients, in inference mode or of a module in ``eval()``,
  once the script has made an optimizer or run a backward: evaluation, timed between steps and
  never a step, its samples none of a step's (before that, an inference script's calls are steps);
- **communication**: DDP's all-reduce, ``torch.distributed``'s collectives and tensor parallel's
  functional collectives (engine/watch/communication.py); a barrier is ``wait``;
- **wait**: a pipeline stage waiting for its peer's activation or gradient (the same module);
- **data**: each batch's fetch from a DataLoader without workers, which loads it in the rank's own
  process (engine/watch/script_facts.py times it: busy); a script that makes its batches itself, from
  a step's end to the next step's first forward (the input pipeline, and whatever else the script does
  between steps), less any wait for a peer in it;
- **data-wait**: each batch's fetch from a DataLoader with worker processes: the rank waits (idle).
A step's samples come from, in order: what the script said (splitscope/watch.py ``watch.step(samples=)``),
the DataLoader batches fetched for it, ``--samples-per-step``, else the batch dimension of the first tensor the
model took, positional or keyword (engine/watch/script_facts.py: what the script is, read as it runs). What the
hooks cannot know the script may say (``with watch.phase(kind):``; a script that times its own ``data`` replaces
the guess above).
Every time is a mark of the instruments' clock (engine/watch/clocks.py): the host's on a CPU device, CUDA
events on the stream that runs the work on a GPU (chosen at the first forward, from the model's parameters).
A step's report goes out once its marks are seconds: at once on a CPU; on a GPU when the GPU has passed
them, asked at the next steps' ends without waiting, so the script's host runs ahead as it would unwatched.
The hooks on module calls and optimizer steps are engine/watch/call_hooks.py's (``CallHooks``); how a step
ends and is reported, engine/watch/step_queue.py's (``StepEnds``).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable

from engine.devices import Device
from engine.measure.counted_step import counted_step_note
from engine.watch import communication, wrappers
from engine.watch.call_hooks import CallHooks
from engine.watch.clocks import HostClock
from engine.watch.script_facts import ScriptReader

# WatchEnded: part of this module's interface (what the bootstrap catches)
from engine.watch.step_queue import QueuedStep, StepEnds, WatchEnded, on_host  # noqa: F401
from engine.wire.rank import StepReport


class Instruments(StepEnds, CallHooks):
    def __init__(self, device, emit: Callable[[StepReport], None], steps: int | None = None,
                 on_training: Callable[[], None] | None = None, count_flops: bool = True, warmup: int = 1):
        """``device``: the rank's (an engine.devices.Device, or a CPU device's name). ``on_training``: called
        once, at the script's first training forward (the hang timeout bounds everything before it: the
        script's imports, datasets, the rendezvous; engine/run/heartbeat.py). ``count_flops``: count the FLOPs
        of step ``COUNTED_STEP`` (engine/measure/flops.py, as the engine's ranks count theirs; the step after
        those --profile-steps records where it is one of them); ``warmup``: the
        run's (a counted step among the measured ones is said)."""
        self._warmup = warmup
        self.own = device if not isinstance(device, str) else Device(device, "cpu", 0)
        self.device = self.own.name
        self.misplaced: str | None = None  # the model is not on the rank's kind of device (clocks.clock_for)
        self.uncounted: str | None = None  # why no FLOPs were counted
        self._count_flops = count_flops
        self.flops = None                  # the counter (engine.measure.flops.DeviceFlops), from the counted step on
        self._counting = None              # its context, entered for the counted step
        self.emit = emit
        self.max_steps = steps
        self.profiler = None               # torch.profiler over the steps --profile-steps asks for (StepProfiler)
        self._on_training = on_training
        self.clock = HostClock()           # the model's device's, from the first forward (engine/watch/clocks.py)
        self._clock_chosen = False
        self._stages: list[int] = []       # the torch.distributed.pipelining stages this rank holds
        self.step = 0
        self._lock = threading.Lock()      # a DDP bucket completes on gloo's thread
        self._intervals: list[list] = []
        self._queued: list[QueuedStep] = []
        self._depth = 0                    # module calls open on the main thread
        self._in_backward = 0
        self._forward_start = None
        self._optimizer_start = None
        self._step_start = None            # the previous step's end; None before the first forward
        self._waited_until = None          # the end of the last wait for a peer
        self._forwarded = False            # this step has had its first forward
        self._counted = None               # the module whose calls count the samples (the first one called)
        self._samples = 0
        self._samples_from: str | None = None   # where they were read (script_facts.first_input)
        self.given_samples: int | None = None   # --samples-per-step
        self.reader = ScriptReader()       # what the script is (engine/watch/script_facts.py)
        self._calls: list[str] = []        # the kind of each outermost call open: "train", "eval" or "skip"
        self._eval_from = None             # evaluation since the last step: its first mark and its last
        self._eval_until = None
        self._ever_trained = False         # a backward was seen: calls without gradients since are evaluation
        self._optimized = False            # an optimizer has stepped: optimizers end the steps
        self._steppers: set[int] | None = None   # the optimizers a step ends with (learned on the first step)
        self._stepped_now: set[int] = set()      # those that stepped in the step under way
        self._boundary = None              # the step under way as it was at its last optimizer step (``Boundary``)
        self._backwards = 0                # backwards in the step under way (gradient accumulation: several)
        self._trained: dict[int, tuple[bool, int]] = {}   # module id -> (trained, optimizers known when asked)
        self._optimizer_steps = 0          # optimizer steps the hooks saw (GradScaler's skipped ones are not)
        self._count_next = False           # the FLOPs of the next step to start are to be counted
        self._loader_timed = False         # this step's batches came from a DataLoader, their fetches timed as data
        self._grad_enabled = self._inference_mode = lambda: False   # torch's, once installed
        self._losses: list = []
        self._declared_samples: int | None = None   # the step's samples and loss as the script said them
        self._declared_loss: float | None = None    # (watch.step)
        self._own_data = False             # the script times its data itself (watch.phase("data"))
        self._backward_seen = False        # this step has had a backward
        self.forward_steps = False         # no optimizer steps: each outermost forward was a step
        self.hand_steps = False            # no optimizer steps: the script updated its parameters itself
        self._after_backward = None        # the model's first trained parameter and its gradient after a backward
        self._handles: list = []
        self._main = threading.main_thread().ident   # the hooks time the script's own thread
        self._compiling = lambda: False     # torch.compiler.is_compiling once installed: whether Dynamo traces the hook
        self.calling = threading.local()   # inside a timed collective: the ones it calls are its own
        self._undo: list[Callable[[], None]] = []
        self.after_backward: list[Callable[[], None]] = []   # read at each outermost backward's end (communication.py)

    # ---- installing ------------------------------------------------------------------
    def install(self) -> None:
        import torch
        import torch.autograd
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim
        self._compiling = torch.compiler.is_compiling
        self._grad_enabled, self._inference_mode = torch.is_grad_enabled, torch.is_inference_mode_enabled
        # A forked child (a DataLoader's worker) inherits the hooks: they time nothing there, the rank's own thread
        # id notwithstanding
        os.register_at_fork(after_in_child=self._forked)
        self._handles += [nn_module.register_module_forward_pre_hook(self._before_forward),
                          # also after a forward that raised (a script may catch it and go on); with its keyword
                          # arguments, where a model(**batch) gets its samples
                          nn_module.register_module_forward_hook(self._after_forward, always_call=True,
                                                                 with_kwargs=True),
                          optim.register_optimizer_step_pre_hook(self._before_optimizer),
                          optim.register_optimizer_step_post_hook(self._after_optimizer)]
        for wrap in (wrappers.time_backward, wrappers.time_skipped_steps, wrappers.note_pipeline_stages):
            self._undo.append(wrap(self))
        for timing in (communication.time_collectives, communication.time_functional_collectives,
                       communication.time_ddp_buckets, communication.time_peer_waits):
            self._undo += timing(self)
        self._undo += self.reader.install()
        self.reader.clock, self.reader.on_fetch = (lambda: self.clock.now()), self._fetched

    def _fetched(self, kind: str, t0, t1) -> None:
        """A DataLoader's batch, fetched on the script's thread from mark ``t0`` to ``t1``: the step's data, loaded or
        waited for (``kind``; what else the script does between its steps is not, where the batches come from a
        DataLoader)."""
        if threading.get_ident() != self._main or self._own_data:
            return
        self._loader_timed = True
        if self._step_start is None:   # the first step starts at its first batch
            self._step_start = t0
        self.add(kind, t0, t1)

    def _forked(self) -> None:
        self._main = None

    def backward_ended(self, t0, tensors) -> None:
        """An outermost backward (engine/watch/wrappers.py) ran from mark ``t0`` to now; its loss, a scalar alone or
        as a pipeline's last stage hands it over (a one-tensor sequence), is the step's."""
        import torch
        self.add("backward", t0, self.clock.now())
        for read in self.after_backward:
            read()
        self._backward_seen = self._ever_trained = True
        self._backwards += 1
        if not self._optimized:
            self._after_backward = self._update_sign()
        alone = tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else tensors
        if isinstance(alone, torch.Tensor) and alone.dim() == 0:
            self._losses.append(on_host(alone.detach()) if self.clock.deferred else alone.detach())

    def skipped_optimizer_step(self, optimizer, args, kwargs) -> None:
        """GradScaler skipped the optimizer's step (its gradients overflowed): the step ends there all the same."""
        if threading.get_ident() == self._main:
            self._before_optimizer(optimizer, args, kwargs)
            self._after_optimizer(optimizer, args, kwargs)

    def uninstall(self) -> None:
        for handle in self._handles:
            handle.remove()
        for undo in reversed(self._undo):
            undo()
        self._handles, self._undo = [], []

    # ---- what the timers report (engine/watch/communication.py too) --------------------
    def add(self, kind: str, t0, t1, *waited) -> None:
        """``kind`` from mark ``t0`` to mark ``t1``, in the step under way (data: and the last wait for a peer
        before ``t1``, which is not data). Any thread."""
        with self._lock:
            self._intervals.append([kind, t0, t1, *waited])

    def collective_returned(self, kind: str, t0, end) -> None:
        """A collective the calling thread waited for, from ``t0`` to ``end``."""
        if self._step_start is None:   # before the first forward (a start-up barrier): the first step's
            self._step_start = t0
        self.add(kind, t0, end)
        if not self._depth and not self._in_backward:   # between steps: not the input pipeline's time
            self._waited_until = end

    def waited(self, t0, end) -> None:
        """A pipeline stage waited for its peer from ``t0`` to ``end``."""
        self._waited_until = end
        self.add("wait", t0, end)

    def training(self) -> None:
        """The script trains (its first forward): ``on_training``, once."""
        if self._on_training is not None:
            callback, self._on_training = self._on_training, None
            callback()
            self._profile_boundary(None)   # the first step begins

    # ---- what the script says (splitscope/watch.py) ------------------------------------
    def declare(self, samples: int | None = None, loss: float | None = None) -> None:
        if samples is not None:
            self._declared_samples = samples
        if loss is not None:
            self._declared_loss = loss

    def now(self):
        """A mark of the watch's clock (engine/watch/clocks.py), for a block the script times (splitscope/watch.py)."""
        return self.clock.now()

    def declare_phase(self, kind: str, t0, t1) -> None:
        """A block the script timed itself, from mark ``t0`` to mark ``t1``."""
        if kind == "data":
            self._own_data = True
        if self._step_start is None:   # the first step starts at whatever the script does first
            self._step_start = t0
        self.add(kind, t0, t1)

    # ---- the script's end --------------------------------------------------------------
    def finish(self) -> None:
        """The script ended: an inference script's last forward is its last step, as is a hand-updating one's last
        backward and update; every step reported."""
        try:
            if not self._optimized and self._backward_seen and self._update_sign() != self._after_backward:
                # one update, by hand, after the last backward (a first one included)
                self.hand_steps = self.reader.hand_updates = True
            if self._boundary is not None:   # optimizers stepped after its last whole step: a step of its own
                self._end_at(self._boundary)
            if not self._optimized and self._forwarded and (self.hand_steps or not self._backward_seen):
                self.forward_steps = self.forward_steps or not self._backward_seen
                self._end_step(self.clock.now())
        finally:
            self.stop_counting()
            self.close_profiler()
            self.flush()

    def stop_counting(self) -> None:
        """The script ended (or failed) inside its counted step: the counter's mode left, its count not used."""
        if self._counting is not None:
            counting, self._counting, self.flops = self._counting, None, None
            counting.__exit__(None, None, None)

    def note(self) -> str | None:
        """What a reader must know of this rank's steps, a line a note."""
        notes = [self.misplaced, self.uncounted,
                 counted_step_note(self.max_steps or 0, self._warmup, self.profiled()) if self.counted() else None]
        if not self._optimized and self.hand_steps:
            notes.append("no optimizer stepped: a step ends where the script updated its parameters itself (its "
                         "model's next call after a backward, with its parameters or their gradients changed since)")
        elif not self._optimized and self.forward_steps:
            notes.append("no optimizer stepped: each of the script's outermost forward calls is a step (inference "
                         "or evaluation)")
        return "\n".join(note for note in notes if note) or None   # a line each (the worker says each once)

    def _update_sign(self):
        """What a hand-made update changes, of the model's first trained parameter: its version (an in-place
        update under no_grad) and its gradient's identity and version (set to None, replaced or zeroed after the
        update); None for a model without one."""
        parameter = next((p for p in self._counted.parameters() if p.requires_grad), None) \
            if self._counted is not None else None
        if parameter is None:
            return None
        grad = parameter.grad
        return parameter._version, id(grad), grad._version if grad is not None else None

    # ---- steps -------------------------------------------------------------------------
    def unformulated(self) -> dict[str, float] | None:
        """The counted step's seconds in each operation that took time but has no FLOP formula (and is not one that
        counts none by convention: engine/measure/flops.py), and ``"step"``: all its operations' seconds."""
        if not self.counted():
            return None
        found = dict(getattr(self.flops, "unformulated", {}) or {})
        return {**found, "step": float(getattr(self.flops, "counted_seconds", 0.0) or 0.0)}

    def counted(self) -> bool:
        """Whether a counted step ended (its FLOPs reported): the counter kept, its mode left."""
        return self.flops is not None and self._counting is None

    def peaks(self) -> dict[str, dict] | None:
        """This rank's device's peak FLOP/s in the dtype most of the counted step's FLOPs ran in
        (engine/run/rank.py device_peaks: measured once a machine, then cached), for MFU; None before a counted
        step, and where the model was not on the rank's device."""
        dtype = self.flops.main_dtype() if self.counted() else None
        if dtype not in ("float32", "bfloat16", "float16") or self._counted is None or self.misplaced:
            return None
        from engine.run.rank import device_peaks, unpinned_cpu_peaks
        if self.own.kind != "cpu" or self.own.core is not None:
            return device_peaks([self.own], dtype, self._counted)
        return unpinned_cpu_peaks(self.own, dtype, self._counted)


