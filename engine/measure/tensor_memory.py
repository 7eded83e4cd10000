"""The memory a run's tensors use on each device, by kind, step by step.

A CPU virtual device's memory as the OS sees it is its process's, and most of it is
the interpreter with torch loaded (about 700 MB): nearly the same for every
strategy. What differs between strategies is what the model puts on a device:

- ``params``: the parameters (and buffers) of the modules placed on it;
- ``grads``: their gradients, as the step leaves them;
- ``optimizer``: the optimizer's state for those parameters (none for plain SGD, two moments for AdamW);
- ``activations``: the most bytes saved for backward at once during the step, counted
  by autograd's saved-tensor hooks while a module placed on the device runs its
  forward, and the loss computed on its output (a saved tensor by the bytes it spans
  of its storage, a part two saved tensors share once, a parameter never; released
  when backward uses it). A pipeline's schedule shows here: GPipe
  keeps every micro-batch's activations until the backward passes, 1F1B a few.

All of it is counted on sampled steps (the first three, then every ``RECOUNT_EVERY``-th)
and held in between: what a training step holds repeats from step to step.

Sharded parameters, gradients and optimizer state (FSDP's and tensor parallelism's
DTensors) count their local shard: what the device holds. A parameter FSDP gathers
for a forward and saves for its backward is a parameter, not an activation. Under
bfloat16 autocast the bfloat16 copies of the weights that the forward saves for
backward are activations: the step holds them (autocast caches one per weight).

FSDP's peak is decided by what it holds only inside a step (gathered parameters,
all-gather and reduce-scatter buffers, unsharded gradients, backward's temporaries):
where the executor has a ``step_peak`` tracker, the last warm-up step runs inside it
and ``step_peak`` gives that step's tensors at their peak by torch's kinds
(engine/strategies/fsdp_peak.py). It needs two warm-up steps (the default): the
first step's peak is the optimizer's state being made.

On a GPU, ``allocated_peak`` adds what torch's caching allocator had allocated at
most during the step (``torch.cuda.max_memory_allocated``): every tensor, the
temporaries too, and still not the CUDA context that NVML's figure includes; the
summary's ``other`` is that peak less the kinds above (gathered parameters,
communication buffers, temporaries).
"""
from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from engine.devices import Device

KINDS = ("params", "grads", "optimizer", "activations")
# What the model holds changes in the first steps (gradients and optimizer state appear) and rarely after:
# counted on the first three steps and every this-many after. Counting costs: about 0.1 ms for an 8-block
# model's held tensors, which a tiny model's 0.3-ms step would pay every step, and a Python call per saved
# tensor in the forward and backward, which shifted ddp's ranks against each other at every all-reduce
# (tests/test_measurements.py's ranks that wait) when it ran on every step.
RECOUNT_EVERY = 100


@dataclass(frozen=True)
class Placement:
    """A module an executor placed on a device, and the optimizer that updates it (None: another does)."""
    device: Device
    module: torch.nn.Module
    optimizer: torch.optim.Optimizer | None = None


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's (fsdp, tensor-parallel) local shard: what this rank holds; any other tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def _storage(t: torch.Tensor) -> tuple[int, int]:
    storage = _local(t).untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def _bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors``."""
    seen: dict[int, int] = {}
    for t in tensors:
        if t is not None:
            ptr, size = _storage(t)
            seen[ptr] = size
    return sum(seen.values())


def _extent(t: torch.Tensor) -> tuple[int, int, int]:
    """(its storage's address, first byte, end byte): the part of its storage a tensor spans. A replica's
    slice of a whole batch, or a micro-batch's, holds its own bytes, not the batch's storage behind it."""
    t = _local(t)
    start = t.storage_offset() * t.element_size()
    if t.numel() == 0:
        return t.untyped_storage().data_ptr(), start, start
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    return t.untyped_storage().data_ptr(), start, start + span * t.element_size()


def _union(intervals) -> int:
    """Bytes covered by [start, end) intervals: two saved views of one storage that overlap count once."""
    covered, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start >= reach:
            covered += end - start
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    return covered


class ActivationCounter:
    """Live bytes saved for backward per device, and their peak since ``reset``.

    The saved-tensor hooks are pushed when a placed module's forward starts and popped
    when it ends, in the thread that runs it: executors run devices in threads of their
    own, and autograd's default hooks are per thread. When the outermost placed forward
    of a thread ends, hooks for its device stay on until that thread's next forward: the
    loss computed on the output saves tensors too (a cross-entropy its softmax), and it
    runs outside any module, on the device of the stage that made the output.
    """

    def __init__(self, placements: list[Placement]):
        import torch
        self._torch = torch
        self._lock = threading.Lock()
        self._local = threading.local()
        self._live: dict[str, int] = {}
        self._peak: dict[str, int] = {}
        # (device, data_ptr) -> [{(start, end): references}, bytes counted for it]: two replicas' slices of one
        # batch are one storage, each device's part its own
        self._storages: dict[tuple[str, int], list] = {}
        self._params: set[int] = set()
        self._handles = []
        self.counting = True     # off: a forward runs without hooks (TensorMeter samples steps)
        for placement in placements:
            for tensor in (*placement.module.parameters(), *placement.module.buffers()):
                self._params.add(_storage(tensor)[0])
            name = placement.device.name
            self._live.setdefault(name, 0)
            self._peak.setdefault(name, 0)
            self._handles.append(placement.module.register_forward_pre_hook(
                lambda _m, _args, name=name: self._enter(name)))
            self._handles.append(placement.module.register_forward_hook(
                lambda _m, _args, _out: self._leave(), always_call=True))

    def _hooks(self, device: str):
        hooks = self._torch.autograd.graph.saved_tensors_hooks(lambda t: self._pack(device, t), self._unpack)
        hooks.__enter__()
        return hooks

    def _enter(self, device: str) -> None:
        local = self._local
        if not hasattr(local, "stack"):
            local.stack, local.after = [], None
        if local.after is not None:  # the last forward's loss hooks: this thread's next forward has begun
            local.after.__exit__(None, None, None)
            local.after = None
        local.stack.append((device, self._hooks(device) if self.counting else None))

    def _leave(self) -> None:
        local = self._local
        stack = getattr(local, "stack", None)
        if stack:
            device, hooks = stack.pop()
            if hooks is not None:
                hooks.__exit__(None, None, None)
                if not stack:
                    local.after = self._hooks(device)

    def _pack(self, device: str, t: torch.Tensor):
        # A parameter, or a view of one (a linear layer saves its weight transposed): FSDP's gathered parameters
        # too, whose storage is not the shard's. They are "params".
        if isinstance(t if t._base is None else t._base, self._torch.nn.Parameter):
            return t, None
        try:
            ptr, start, end = _extent(t)
        except RuntimeError:
            # A tensor subclass's wrapper saved by an op on it (tensor parallelism's loss on a DTensor): no storage
            # of its own, what it holds is its local tensor's, which that op's own saves count.
            return t, None
        if ptr in self._params or end <= start:
            return t, None
        span, key = (start, end), (device, ptr)
        with self._lock:
            entry = self._storages.get(key)
            if entry is None:
                entry = self._storages[key] = [{}, 0]
            entry[0][span] = entry[0].get(span, 0) + 1
            self._recount(key, entry)
        return t, [key, span]

    def _recount(self, key: tuple[str, int], entry: list) -> None:
        spans, counted = entry
        device = key[0]
        covered = _union(spans)
        self._live[device] += covered - counted
        entry[1] = covered
        self._peak[device] = max(self._peak[device], self._live[device])
        if not spans:
            del self._storages[key]

    def _unpack(self, packed):
        t, token = packed
        if token:  # the first use in backward releases it; a second use (retain_graph) counts nothing
            key, span = token
            token.clear()
            with self._lock:
                entry = self._storages.get(key)
                if entry is not None and span in entry[0]:
                    entry[0][span] -= 1
                    if entry[0][span] <= 0:
                        del entry[0][span]
                    self._recount(key, entry)
        return t

    def take_peaks(self) -> dict[str, int]:
        """Each device's peak since the last call; what a step saved and backward never used is let go."""
        with self._lock:
            peaks = dict(self._peak)
            self._storages.clear()
            self._live = dict.fromkeys(self._live, 0)
            self._peak = dict.fromkeys(self._peak, 0)
        return peaks

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


class TensorMeter:
    """Per device and kind, the bytes of a step's tensors (``after_step``); one per rank process."""

    def __init__(self, placements: list[Placement], recount_every: int = RECOUNT_EVERY,
                 step_peak=None, peak_step: int | None = None):
        """``step_peak``: a factory of the executor's peak tracker (Executor.step_peak), run on step
        ``peak_step``."""
        self.placements = list(placements)
        self._step_peak_factory = step_peak if peak_step is not None and peak_step >= 0 else None
        self._peak_step = peak_step
        self._tracker = None
        self._step_peak: dict[str, dict[str, int]] = {}
        self.activations = ActivationCounter(self.placements)
        self.recount_every = recount_every
        self._gpus = sorted({p.device.index for p in self.placements if p.device.kind == "cuda"})
        self._steps = 0
        self._held: dict[str, dict[str, int]] = {}
        self._peaks: dict[str, int] = {}
        self.before_step()

    def _counted(self) -> bool:
        return self._steps < 3 or self._steps % self.recount_every == 0

    def step_context(self, inputs):
        """What the step on ``inputs`` (its batch's tensors) runs inside: the executor's peak tracker on the
        tracked step, else nothing."""
        if self._step_peak_factory is not None and self._steps == self._peak_step:
            try:
                self._tracker = self._step_peak_factory()   # None: this executor's peak is what it holds
                if self._tracker is not None:
                    self._tracker.track_inputs(inputs)
            except Exception as exc:   # torch's tracker is a private tool: the run goes on without it
                self._tracker = None
                print(f"the step's peak memory is not tracked: {type(exc).__name__}: {exc}", file=sys.stderr)
        return self._tracker if self._tracker is not None else contextlib.nullcontext()

    def before_step(self) -> None:
        self.activations.counting = self._counted()
        if self._gpus:
            import torch
            for index in self._gpus:
                torch.cuda.reset_peak_memory_stats(index)

    def after_step(self) -> dict[str, dict[str, int]]:
        """{device: {"params", "grads", "optimizer", "activations"[, "allocated_peak"][, "step_peak"]}} for the
        step just run; "step_peak" is the tracked step's {kind: bytes}, from then on."""
        if self._counted():
            self._held = self._held_bytes()
            self._peaks = self.activations.take_peaks()
        if self._tracker is not None:
            tracked = {p.device.name: self._tracker.by_kind() for p in self.placements}
            self._step_peak = {device: kinds for device, kinds in tracked.items() if kinds}
            self._tracker = None
        self._steps += 1
        peaks = self._peaks
        out = {device: {**kinds, "activations": peaks.get(device, 0)} for device, kinds in self._held.items()}
        for device, kinds in self._step_peak.items():
            out[device]["step_peak"] = kinds
        if self._gpus:
            import torch
            for p in self.placements:
                if p.device.kind == "cuda":
                    out[p.device.name]["allocated_peak"] = torch.cuda.max_memory_allocated(p.device.index)
        return out

    def _held_bytes(self) -> dict[str, dict[str, int]]:
        """Parameters, gradients and optimizer state per device: what the model holds between steps."""
        by_device: dict[str, dict[str, list]] = {}
        for p in self.placements:
            kinds = by_device.setdefault(p.device.name, {"params": [], "grads": [], "optimizer": []})
            params = list(p.module.parameters())
            kinds["params"] += [*params, *p.module.buffers()]
            kinds["grads"] += [q.grad for q in params]
            if p.optimizer is not None:
                owned = {id(q) for q in params}
                kinds["optimizer"] += [v for q, state in p.optimizer.state.items() if id(q) in owned
                                       for v in state.values() if hasattr(v, "untyped_storage")]
        return {device: {kind: _bytes(tensors) for kind, tensors in kinds.items()} for device, kinds in by_device.items()}

    def close(self) -> None:
        self.activations.close()
