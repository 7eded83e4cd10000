"""Cutting any nn.Module into pipeline stages with torch.distributed.pipelining's tracer.

``pipeline(module, mb_args, split_spec)`` traces the module with torch.export
and returns a ``Pipe`` whose stage ``k`` is a GraphModule holding the module's
own parameters from split point ``k``'s unit to the next. Tracing needs one
example micro-batch of the exact shape the stages will see (export specializes
on shapes) and a model without Python control flow on tensor values; a model
that has it gets a ``TraceError`` naming the line and what to do.

Tracing annotates the module's submodules in place, so each module is traced
once: callers trace a fresh model (every rank builds its own) or a copy.
"""
from __future__ import annotations

import re

import torch

from engine.models.spec import ModelSpec


class TraceError(ValueError):
    pass


def cut(spec: ModelSpec, split: tuple[int, ...], example_inputs: torch.Tensor):
    """The ``Pipe`` of ``spec.module`` with a stage starting at each split point's unit."""
    from torch.distributed.pipelining import SplitPoint, pipeline
    names = [spec.blocks[k][0] for k in split]
    try:
        pipe = pipeline(spec.module, mb_args=(example_inputs,),
                        split_spec={name: SplitPoint.BEGINNING for name in names})
    except Exception as exc:  # export raises many kinds; each becomes one message naming the cause
        raise TraceError(f"{spec.name} cannot be cut into stages at {', '.join(names)}: {explain(exc)}; "
                         f"{_what_to_do(spec)}") from None
    if pipe.num_stages != len(split) + 1:
        raise TraceError(f"{spec.name} cut at {', '.join(names)} gives {pipe.num_stages} stages, not "
                         f"{len(split) + 1}: one of them is called more than once in forward; split elsewhere")
    shared = _shared_parameters(pipe)
    if shared:
        raise TraceError(f"{spec.name} cut at {', '.join(names)} puts the parameter {shared} in more than one "
                         "stage (a weight tied between layers), where each stage would update its own copy; "
                         "split so that every layer using it is in one stage")
    return pipe


def stage_on(pipe, k: int, device: str):
    """Stage ``k``'s module on ``device``, with the device of the tensors its code creates (the tracer wrote
    the example's, the host's, into the graph) set to it too, as ``Pipe.build_stage`` does."""
    from torch.distributed.pipelining._IR import _modify_graph_op_device
    module = pipe.get_stage_module(k)
    if isinstance(module, torch.fx.GraphModule):
        _modify_graph_op_device(module, torch.device(device))
    return module.to(device)


def _shared_parameters(pipe) -> str | None:
    """The name of a parameter two stages both hold (a tied weight, which the tracer gives each stage that
    uses it under its own name), if any."""
    earlier: set = set()   # ids and names of the parameters of the stages before
    for k in range(pipe.num_stages):
        here = list(pipe.get_stage_module(k).named_parameters(remove_duplicate=False))
        for name, parameter in here:
            if id(parameter) in earlier or name in earlier:
                return name
        earlier.update(key for name, parameter in here for key in (id(parameter), name))
    return None


def _what_to_do(spec: ModelSpec) -> str:
    rewrite = ("" if spec.name.startswith("torchvision:") else
               ", or return an nn.Sequential of blocks from build_model()")
    return ("the staged strategies (model-parallel, pipeline) trace the model with torch.export: write that code "
            f"without Python branches or loops on a tensor's values (torch.where, torch.cond){rewrite}; single, "
            "data-parallel and ddp run the model as it is")


_CALL_SITE = re.compile(r'The following call raised this error:\s*File "([^"]+)", line (\d+), in (\w+)\s*\n\s*(.+)')


def explain(exc: BaseException) -> str:
    """The construct that stopped the trace, and where it is in the user's code when export says."""
    causes = []
    while exc is not None and exc not in causes:
        causes.append(exc)
        exc = exc.__cause__ or exc.__context__
    text = "\n".join(str(e) for e in causes)
    site = _CALL_SITE.search(text)
    where = f" at {site.group(1).rsplit('/', 1)[-1]}:{site.group(2)} ({site.group(4).strip()})" if site else ""
    if "data-dependent" in text or "GuardOnDataDependent" in text:
        return f"data-dependent control flow{where} (a branch on a tensor's values)"
    deepest = causes[-1]
    first_line = next((line.strip() for line in str(deepest).splitlines() if line.strip()), type(deepest).__name__)
    return f"{type(deepest).__name__}: {first_line[:300]}{where}"


def run_on_copied_inputs(stage) -> None:
    """Make a pipeline stage run its module on copies of the activations it receives.

    A received activation is a leaf that requires grad, and a stage may start with an in-place op
    (torchvision's ``ReLU(inplace=True)`` after a split at ``relu``), which such a leaf refuses; the copy's
    gradient still reaches the leaf, which the schedule hands back to the stage before. (The stage's module
    itself stays as it is: the stage reads its graph.)
    """
    forward = stage.forward_maybe_with_nosync

    def on_copies(*args, **kwargs):
        return forward(*[a.clone() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args],
                       **kwargs)
    stage.forward_maybe_with_nosync = on_copies
