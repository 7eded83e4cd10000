"""A traced module's stages run one after another in one process, each on its own autograd graph.

Each tensor a stage reads from an earlier stage is cut from the graph (a leaf
that requires grad), so a stage's forward and backward are that stage's work
alone, timed on its own device: the block timing (engine.planner.planning) times each
unit this way, and the one-process stages (engine.strategies.pipeline.in_process_traced_stages)
run a split model this way, handing each cut's gradient back by hand. The stages
are the call_module nodes of the Pipe's top graph; the graph says which earlier
outputs (or model inputs) each stage reads, so a value a later stage reads past
its neighbour (a skip connection) reaches it too.
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import fx


@dataclass
class Cut:
    """A tensor handed from one stage to a later one: ``source`` where it was made, ``leaf`` what the later
    stage computed from (on the later stage's device), whose ``.grad`` goes back to ``source``."""
    source: torch.Tensor
    leaf: torch.Tensor
    source_stage: int   # the stage that made ``source``


@dataclass
class StageRun:
    output: object
    cuts: list[Cut] = field(default_factory=list)


def tensors_in(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in tensors_in(item)]
    return []


def run_each_stage(pipe, inputs: torch.Tensor, run_stage: Callable[[int, Callable[[], object]], object],
                   place: Callable[[int | None, int, torch.Tensor], torch.Tensor] | None = None) -> list[StageRun]:
    """Each stage of ``pipe`` on its cut inputs, in order. ``place(source_stage, k, tensor)`` puts a tensor
    made by ``source_stage`` (None: the model's input) where stage ``k`` reads it (a copy to its device);
    ``run_stage(k, call)`` calls ``call()`` (the stage's forward) as it likes (timing it, running its
    backward) and returns its output."""
    env: dict[fx.Node, object] = {}
    made_by: dict[fx.Node, int | None] = {}  # the stage each value comes from; None for the model's input
    runs: list[StageRun] = []
    model_inputs = iter([inputs])
    for node in pipe.split_gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(model_inputs)
            made_by[node] = None
        elif node.op == "call_module":
            k, cuts = len(runs), []

            def cut(source_node: fx.Node, value, k=k, cuts=cuts):
                if isinstance(value, (tuple, list)):
                    return type(value)(cut(source_node, item) for item in value)
                if not isinstance(value, torch.Tensor):
                    return value
                leaf = value.detach()
                if place is not None:
                    leaf = place(made_by[source_node], k, leaf)
                # The model's own input needs no gradient (as in training): only stage outputs do.
                if made_by[source_node] is None or not leaf.is_floating_point():
                    return leaf
                leaf.requires_grad_(True)
                cuts.append(Cut(value, leaf, made_by[source_node]))
                # A stage may start in place (torchvision's ReLU(inplace=True)), which a leaf that requires
                # grad refuses: the stage gets a copy, whose gradient still reaches the leaf.
                return leaf.clone()
            stage = pipe.get_stage_module(k)
            args = fx.node.map_arg(node.args, lambda n: cut(n, env[n]))
            kwargs = fx.node.map_arg(node.kwargs, lambda n: cut(n, env[n]))
            out = run_stage(k, functools.partial(stage, *args, **kwargs))
            runs.append(StageRun(out, cuts))
            env[node], made_by[node] = out, k
        elif node.op == "call_function" and node.target is operator.getitem:
            env[node] = operator.getitem(*fx.node.map_arg(node.args, lambda n: env[n]))
            made_by[node] = made_by[node.args[0]]
    return runs


def backward_each_stage(runs: list[StageRun], loss: torch.Tensor,
                        run_backward: Callable[[int, Callable[[], None]], None],
                        hand_back: Callable[[int, Cut], torch.Tensor]) -> None:
    """The backward of a forward by ``run_each_stage``, last stage first: ``loss`` (computed from the last
    stage's output) starts it; each stage's backward runs with the gradients its outputs got from every later
    stage. ``run_backward(k, call)`` runs stage ``k``'s (timing it); ``hand_back(k, cut)`` returns the cut's
    gradient where its source is (a copy from stage ``k``'s device)."""
    grad_of: dict[int, torch.Tensor] = {}  # id(source tensor) -> its summed gradient
    for k in range(len(runs) - 1, -1, -1):
        run = runs[k]
        if k == len(runs) - 1:
            run_backward(k, loss.backward)
        else:
            outputs = [t for t in tensors_in(run.output) if t.requires_grad and id(t) in grad_of]
            if outputs:
                grads = [grad_of.pop(id(t)) for t in outputs]
                run_backward(k, functools.partial(torch.autograd.backward, outputs, grads))
        for c in run.cuts:
            if c.leaf.grad is None:
                continue
            grad = hand_back(k, c)
            key = id(c.source)
            grad_of[key] = grad_of[key] + grad if key in grad_of else grad


def backward_with_ones(output) -> None:
    """A stage's backward, as if every output it hands on got a gradient of ones."""
    grads = [t for t in tensors_in(output) if t.requires_grad]
    if grads:
        # Each output's sum: a gradient of ones, without the shape check (and its sympy import) that explicit
        # gradients take (engine/planner/planning.py).
        torch.autograd.backward([t.sum() for t in grads])


def output_bytes(output) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_in(output))
