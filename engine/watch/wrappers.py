"""What the instruments (engine/watch/instruments.py) wrap at class or module level in torch, each taken back by
the function it returns: never anything on the script's own objects."""
from __future__ import annotations

import functools
from collections.abc import Callable


def time_backward(instruments) -> Callable[[], None]:
    """``torch.autograd.backward``, which ``Tensor.backward`` and torch's pipelining schedules call: the outermost
    one timed (reentrant checkpointing calls it again inside: counted once)."""
    import torch
    original = torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        instruments._in_backward += 1
        t0 = instruments.clock.now()
        try:
            return original(tensors, *args, **kwargs)
        finally:
            if instruments._in_backward == 1:
                instruments.backward_ended(t0, tensors)
            instruments._in_backward -= 1
    torch.autograd.backward = backward
    return lambda: setattr(torch.autograd, "backward", original)


def time_skipped_steps(instruments) -> Callable[[], None]:
    """torch's GradScaler skips the optimizer's step where the gradients overflowed (no optimizer hook runs): the
    training step ends there all the same, as that optimizer's step."""
    from torch.amp import grad_scaler
    original = grad_scaler.GradScaler.step

    @functools.wraps(original)
    def step(scaler, optimizer, *args, **kwargs):
        before = instruments._optimizer_steps
        result = original(scaler, optimizer, *args, **kwargs)
        if instruments._optimizer_steps == before:
            instruments.skipped_optimizer_step(optimizer, args, kwargs)
        return result
    grad_scaler.GradScaler.step = step
    return lambda: setattr(grad_scaler.GradScaler, "step", original)


def note_pipeline_stages(instruments) -> Callable[[], None]:
    """A pipeline's stages: only the first stage's inputs are the step's samples (a later stage's module gets
    activations, a micro-batch each)."""
    from torch.distributed.pipelining import stage
    original_init = stage._PipelineStageBase.__init__
    stages = instruments._stages

    @functools.wraps(original_init)
    def init(pipeline_stage, *args, **kwargs):
        original_init(pipeline_stage, *args, **kwargs)
        stages.append(pipeline_stage.stage_index)
    stage._PipelineStageBase.__init__ = init
    return lambda: setattr(stage._PipelineStageBase, "__init__", original_init)
