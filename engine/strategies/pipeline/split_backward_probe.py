"""What splitting a backward costs: a stage's input-then-weight gradient against its whole backward.

The zero-bubble schedules (ZB-V, DualPipeV, interleaved zero bubble) run each
backward in two calls: torch's ``stage_backward_input``, which walks the stage's
autograd graph to find what the weight gradient will need and keeps it, then
``stage_backward_weight``. Together they cost more than the one
``stage_backward`` the other schedules call, by an amount the run's timeline
cannot show for a schedule it did not run; engine.planner.what_if needs it to
predict those schedules from a GPipe or 1F1B run.

After the last step (every rank there: a barrier, so no rank's probe lands in a
peer's last step), each of the rank's stages runs a forward and then the two
backwards on inputs shaped as its last micro-batch's, alternately, up to
``REPEATS`` times each, with torch's own functions, as the schedule calls them
(the module on copies of its inputs, engine.models.tracing.run_on_copied_inputs;
the last stage from its loss). The difference of their fastest (load only ever
adds time), at least 0, summed over the stages, is the device's extra time per
micro-batch. The same on half the micro-batch tells how much of it is a cost per
call and how much grows with the samples (``SplitCost.fixed_s``: the extra is
fixed + rate x samples, the two parts at least 0; on cpu:2, mlp 512x8, a 2-block
stage's extra measured 0.6 ms at 32 samples, 0.7 at 256, 1.6 at 1,024), so
engine.planner.what_if can price a split backward at another micro-batch count (inputs
whose first dimension is not the micro-batch's are kept whole; a stage that takes no
other size counts all of it per call). The first stage is measured as if its input
needed a gradient: torch runs stage 0's backward whole in every schedule, but another
schedule may place this device's work on later stages (the what-if leaves stage 0 out
itself). A stage whose inputs are token ids (no floating input) has no input
half: it counts 0. The probe keeps to a time budget (a share of the run's hang
timeout: the worker hears nothing meanwhile), one pair per stage at least.
"""
from __future__ import annotations

import time

import torch

from engine.results import SplitCost

REPEATS = 3   # each a forward and two backwards per stage, at the micro-batch and half: about 2 steps at m=4


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

    def rows(self, index: int) -> int:
        """The micro-batch's samples: the first dimension of the stage's first floating input (0: none has one)."""
        return next((a[0][0] for a in self.inputs[index] if isinstance(a, tuple) and len(a[0])), 0)

    def remade(self, index: int, rows: int | None = None) -> list:
        """Inputs shaped as the kept ones; with ``rows``, the first ``rows`` samples of those whose first dimension
        is the micro-batch's (position ids and the like kept whole)."""
        full = self.rows(index)

        def shape(kept):
            return (rows, *kept[1:]) if rows is not None and len(kept) and kept[0] == full else kept
        return [torch.randn(shape(a[0]), dtype=a[1], device=a[2], requires_grad=True) if isinstance(a, tuple)
                else _first_rows(a, rows, full) for a in self.inputs[index]]

    def target_of(self, index: int, rows: int | None = None):
        """The loss's target for stage ``index``'s remade inputs (the last stage's)."""
        return _first_rows(self.target, rows, self.rows(index))


def _first_rows(value, rows: int | None, full: int):
    """A kept tensor's first ``rows`` samples where its first dimension is the micro-batch's, else as it is."""
    if rows is None or not isinstance(value, torch.Tensor) or not value.dim() or value.shape[0] != full:
        return value
    return value[:rows]


def _floating(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work: a CUDA kernel runs after the call that launched it."""
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
    synchronize(device)
    start = time.perf_counter()
    if split:
        _, groups = _backward.stage_backward_input(outputs, grads, inputs, module.parameters())
        _backward.stage_backward_weight(module.parameters(), groups)
    else:
        _backward.stage_backward(outputs if grads else outputs[0], grads, inputs)
    synchronize(device)
    return time.perf_counter() - start


def _extra(module, kept: LastInputs, position: int, rows: int | None, loss, device, began: float,
           budget_s: float) -> float:
    """How much longer the split backward takes than the whole one on ``rows`` samples (None: the micro-batch's):
    the difference of their fastest over up to REPEATS alternate pairs (load only ever adds time), at least 0."""
    times: dict[bool, list[float]] = {False: [], True: []}
    for repeat in range(REPEATS):
        if repeat and time.perf_counter() - began > budget_s:
            break
        for split in (False, True):
            times[split].append(_backward_time(module, kept.remade(position, rows), loss,
                                               kept.target_of(position, rows), split, device))
    return max(0.0, min(times[True]) - min(times[False]))


def split_backward_extra_s(modules, indices, last_index: int, kept: LastInputs, loss_fn, device: torch.device,
                           budget_s: float = 30.0) -> tuple[SplitCost | None, str | None]:
    """(What splitting a micro-batch's backward costs on these stage ``modules``, or None; why None.)
    ``indices``: their stage numbers, ``last_index`` the pipeline's last."""
    extra, fixed, began = 0.0, 0.0, time.perf_counter()
    kept.armed = False   # the probe's own forwards are not the last step's: what they get is not kept
    try:
        for position, (module, index) in enumerate(zip(modules, indices, strict=True)):
            if position not in kept.inputs:
                return None, f"stage {index} ran no forward on the last step"
            if not any(isinstance(a, tuple) for a in kept.inputs[position]):
                continue   # no input a gradient could flow to (token ids): the split has no input half here
            loss = loss_fn if index == last_index else None
            rows = kept.rows(position)
            whole = _extra(module, kept, position, None, loss, device, began, budget_s)
            extra += whole
            try:   # the same on half the micro-batch: how much of the extra is paid per call
                half = _extra(module, kept, position, rows // 2, loss, device, began, budget_s) if rows >= 2 else None
            except Exception:  # noqa: BLE001  (a stage that takes no other batch size: all of it per call)
                half = None
            # fixed + rate x samples through the two sizes, each part at least 0
            fixed += whole if half is None else min(whole, max(0.0, whole - (whole - half) / (rows - rows // 2) * rows))
            module.zero_grad(set_to_none=True)
    except Exception as exc:   # another torch's functions, a stage they refuse, a model's loss: the run stands
        return None, f"{type(exc).__name__}: {exc}"
    return SplitCost(extra, fixed), None
