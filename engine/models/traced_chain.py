"""A traced module's stages run one after another in one process, each on its own autograd graph.

Each stage's inputs are cut from the graph (detached, gradients required), so a
stage's forward and backward are one stage's work alone: the block timing
(engine.planning) times each unit this way, as it times a chain of blocks. The
stages are the call_module nodes of the Pipe's top graph; the graph says which
earlier outputs (or model inputs) each stage reads, so a value a later stage
reads past its neighbour (a skip connection) reaches it too.
"""
from __future__ import annotations

import operator
from typing import Callable

import torch
from torch import fx

StageHook = Callable[[int, Callable[[], object]], object]


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _cut(value, needs_grad: bool):
    if isinstance(value, torch.Tensor):
        cut = value.detach().requires_grad_(needs_grad and value.is_floating_point())
        # A stage may start in place (torchvision's ReLU(inplace=True)), which a leaf that requires
        # grad refuses: the stage gets a copy, whose gradient still reaches the cut.
        return cut.clone() if cut.requires_grad else cut
    if isinstance(value, (tuple, list)):
        return type(value)(_cut(item, needs_grad) for item in value)
    return value


def run_each_stage(pipe, inputs: torch.Tensor, run_stage: StageHook) -> list[object]:
    """Each stage of ``pipe`` on its cut inputs, in order; ``run_stage(k, call)`` calls ``call()`` (the stage's
    forward) as it likes (timing it, running its backward) and returns its output. Returns the outputs."""
    graph: fx.Graph = pipe.split_gm.graph
    env: dict[fx.Node, object] = {}
    outputs: list[object] = []
    model_inputs = iter([inputs])
    for node in graph.nodes:
        if node.op == "placeholder":
            env[node] = next(model_inputs)
        elif node.op == "call_module":
            k = len(outputs)
            stage = pipe.get_stage_module(k)
            # The model's own input needs no gradient (as in training): only later stages' inputs do.
            args = fx.node.map_arg(node.args, lambda n: _cut(env[n], needs_grad=n.op != "placeholder"))
            kwargs = fx.node.map_arg(node.kwargs, lambda n: _cut(env[n], needs_grad=n.op != "placeholder"))
            out = run_stage(k, lambda: stage(*args, **kwargs))
            outputs.append(out)
            env[node] = out
        elif node.op == "call_function" and node.target is operator.getitem:
            env[node] = operator.getitem(*fx.node.map_arg(node.args, lambda n: env[n]))
    return outputs


def backward_with_ones(output) -> None:
    """The stage's backward, as if every output it hands on got a gradient of ones."""
    grads = [t for t in _tensors(output) if t.requires_grad]
    if grads:
        torch.autograd.backward(grads, [torch.ones_like(t) for t in grads])


def output_bytes(output) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(output))
