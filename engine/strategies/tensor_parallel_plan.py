"""Which linear layers tensor parallelism splits: pairs of consecutive nn.Linear in a chain of blocks.

The first of a pair is split column-wise (each device computes a slice of its
outputs), the second row-wise (each device reads that slice and the partial
outputs are all-reduced), so between them only element-wise activations may
run: they act on a slice as on the whole. A pair needs the first's outputs to
divide among the devices. Only chains of blocks qualify (the built-in models, a
model file's nn.Sequential), where modules run in the order they are listed;
any other module's forward may reshape or mix features between two layers.
"""
from __future__ import annotations

from engine.problems import Problem

# Modules that may sit between a pair: element-wise and without parameters.
_ELEMENTWISE = ("ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "Dropout", "Identity", "Mish", "ELU")


def linear_pairs(module, width: int) -> list[tuple[str, str]]:
    """(column-wise, row-wise) names of the pairs in ``module``'s leaf modules, in order."""
    from torch import nn
    leaves = [(name, m) for name, m in module.named_modules() if not list(m.children())]
    pairs, first = [], None
    for name, leaf in leaves:
        if isinstance(leaf, nn.Linear):
            if first is not None and leaf.in_features == first[1].out_features:
                pairs.append((first[0], name))
                first = None
            else:
                first = (name, leaf) if leaf.out_features % width == 0 else None
        elif type(leaf).__name__ not in _ELEMENTWISE or list(leaf.parameters(recurse=False)):
            first = None
    return pairs


def plan_problems(spec, width: int, strategy: str, option: str) -> list[Problem]:
    """Why ``spec`` cannot be split ``width`` ways by tensor parallelism ([] when it can), said of ``option``."""
    if spec.traced:
        return [Problem(option, f"{strategy} splits pairs of linear layers in a chain of blocks (the built-in "
                                f"models, a model file's nn.Sequential); {spec.name} is not one")]
    if not linear_pairs(spec.whole(), width):
        return [Problem(option, f"{strategy} needs two consecutive nn.Linear layers, the first with outputs "
                                f"divisible by {width} devices and only element-wise activations between them; "
                                f"{spec.name} has no such pair")]
    return []


def parallelize_plan(module, width: int) -> dict:
    """torch's plan for ``parallelize_module``: the pairs' names, column-wise then row-wise."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    plan = {}
    for column, row in linear_pairs(module, width):
        plan[column] = ColwiseParallel()
        plan[row] = RowwiseParallel()
    return plan
