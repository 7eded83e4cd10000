"""What splitting a backward costs: a stage's input-then-weight gradient against its whole backward.

The zero-bubble schedules (ZB-V, DualPipeV, interleaved zero bubble) run each
backward in two calls: torch's ``stage_backward_input``, which walks the stage's
autograd graph to find what the weight gradient will need and keeps it, then
``stage_backward_weight``. Together they cost more than the one
``stage_backward`` the other schedules call, by an amount the run's timeline
cannot show for a schedule it did not run; engine.plan.what_if needs it to
predict those schedules from a GPipe or 1F1B run.

After the last step (every rank there: a barrier, so no rank's probe lands in a
peer's last step), each of the rank's stages runs a forward and then the two
backwards on inputs shaped as its last micro-batch's, alternately, up to
``REPEATS`` times each, with torch's own functions, as the schedule calls them
(the module on copies of its inputs, engine.models.tracing.run_on_copied_inputs;
the last stage from its loss). The difference of their fastest (load only ever
adds time), at least 0, summed over the stages, is the device's extra time per
micro-batch. The first stage is measured as if its input needed a gradient:
torch runs stage 0's backward whole in every schedule, but another schedule may
place this device's work on later stages (the what-if leaves stage 0 out
itself). A stage whose inputs are token ids (no floating input) has no input
half: it counts 0. The probe keeps to a time budget (a share of the run's hang
timeout: the worker hears nothing meanwhile), one pair per stage at least.
"""
from __future__ import annotations

import time

import torch

REPEATS = 3   # each a forward and two backwards of one micro-batch per stage: the probe is about 1.5 steps at m=4


class LastInputs:
    """Each stage module's inputs on the step that ``armed`` is set for: shapes and dtypes of the floating
    ones (remade at random for the probe, holding no activation meanwhile), the others kept (indices)."""

    def __init__(self, modules):
        self.armed = False
        self.inputs: dict[int, tuple] = {}
        self.target = None
        for index, module in enumerate(modules):
            module.register_forward_pre_hook(self._keeper(index))

    def _keeper(self, index: int):
        def keep(_module, args):
            if self.armed:
                self.inputs[index] = tuple((a.shape, a.dtype, a.device) if _floating(a) else a for a in args)
        return keep

    def keep_target(self, target) -> None:
        if self.armed:
            self.target = target

    def remade(self, index: int) -> list:
        return [torch.randn(a[0], dtype=a[1], device=a[2], requires_grad=True) if isinstance(a, tuple) else a
                for a in self.inputs[index]]


def _floating(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _backward_time(module, inputs, loss_fn, target, split: bool, device: torch.device) -> float:
    from torch.distributed.pipelining import _backward
    output = module(*[a.clone() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in inputs])
    if loss_fn is not None:   # the last stage: its backward starts from the loss of its output, as torch's
        outputs, grads = [loss_fn(output, target)], None
    else:
        outputs = list(output) if isinstance(output, (tuple, list)) else [output]
        grads = [torch.randn_like(o) for o in outputs]
    _synchronize(device)
    start = time.perf_counter()
    if split:
        _, groups = _backward.stage_backward_input(outputs, grads, inputs, module.parameters())
        _backward.stage_backward_weight(module.parameters(), groups)
    else:
        _backward.stage_backward(outputs if grads else outputs[0], grads, inputs)
    _synchronize(device)
    return time.perf_counter() - start


def split_backward_extra_s(modules, indices, last_index: int, kept: LastInputs, loss_fn, device: torch.device,
                           budget_s: float = 30.0) -> tuple[float | None, str | None]:
    """(Seconds a micro-batch's backward takes longer, split, on these stage ``modules``, or None; why None.)
    ``indices``: their stage numbers, ``last_index`` the pipeline's last."""
    extra, began = 0.0, time.perf_counter()
    try:
        for position, (module, index) in enumerate(zip(modules, indices)):
            if position not in kept.inputs:
                return None, f"stage {index} ran no forward on the last step"
            if not any(isinstance(a, tuple) for a in kept.inputs[position]):
                continue   # no input a gradient could flow to (token ids): the split has no input half here
            loss = loss_fn if index == last_index else None
            times: dict[bool, list[float]] = {False: [], True: []}
            for repeat in range(REPEATS):
                if repeat and time.perf_counter() - began > budget_s:
                    break
                for split in (False, True):
                    times[split].append(_backward_time(module, kept.remade(position), loss, kept.target, split,
                                                       device))
            extra += max(0.0, min(times[True]) - min(times[False]))
            module.zero_grad(set_to_none=True)
    except Exception as exc:   # another torch's functions, a stage they refuse, a model's loss: the run stands
        return None, f"{type(exc).__name__}: {exc}"
    return extra, None
