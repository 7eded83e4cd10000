"""A module's split units: the named submodules a stage may start at, in the order forward first calls them.

``--split-level 1`` takes the module's children, ``2`` one level deeper (a
ResNet's ``layer3.0`` rather than ``layer3``). Containers that forward never
calls itself (``nn.ModuleList``, ``nn.ModuleDict``) stand for their items at the
same level, so a transformer's ``layers`` gives ``layers.0``, ``layers.1``, ...
The order is the call order, not the declaration order: a model may declare its
head before its body. Submodules forward never calls (an unused auxiliary head)
or calls more than once (one activation reused between layers) are no split
points.
"""
from __future__ import annotations

import torch
from torch import nn


def candidates(module: nn.Module, level: int) -> list[tuple[str, nn.Module]]:
    """The submodules at ``level``, in declaration order."""
    found: list[tuple[str, nn.Module]] = []

    def walk(prefix: str, parent: nn.Module, depth: int) -> None:
        for name, child in parent.named_children():
            qualified = prefix + name
            if isinstance(child, (nn.ModuleList, nn.ModuleDict)):
                walk(qualified + ".", child, depth)
            elif depth < level and next(child.children(), None) is not None:
                walk(qualified + ".", child, depth + 1)
            else:
                found.append((qualified, child))
    walk("", module, 1)
    return found


def split_units(module: nn.Module, level: int, sample_inputs: torch.Tensor) -> list[tuple[str, nn.Module]]:
    """The candidates in the order one forward pass of ``sample_inputs`` first calls them.

    The pass runs without gradients and in eval mode (a BatchNorm's statistics stay as they were, a
    dropout draws nothing), on whatever device the module is on (the meta device when validating).
    """
    found = candidates(module, level)
    first_call: dict[str, int] = {}
    calls: dict[str, int] = {}

    def record(name: str) -> None:  # a pre-hook that returns a value would replace the call's inputs
        first_call.setdefault(name, len(first_call))
        calls[name] = calls.get(name, 0) + 1
    hooks = [sub.register_forward_pre_hook(lambda *_, name=name: record(name)) for name, sub in found]
    modes = {m: m.training for m in module.modules()}
    try:
        module.eval()
        with torch.no_grad():
            module(sample_inputs)
    except (RuntimeError, NotImplementedError) as exc:
        if not meta_only_failure(exc):
            raise
        # A forward that reads a tensor's values (.item(), a branch) cannot run on the meta device;
        # validation then takes the declaration order (the order only matters to a split, which the
        # tracer will refuse for such a model anyway).
        return found
    finally:
        for hook in hooks:
            hook.remove()
        for m, training in modes.items():
            m.training = training
    # A submodule called more than once (one ReLU reused between layers) is no split point: the tracer
    # would start a stage at every one of its calls.
    called = [(name, sub) for name, sub in found if calls.get(name) == 1]
    return sorted(called, key=lambda unit: first_call[unit[0]])


def meta_only_failure(exc: BaseException) -> bool:
    """A failure only the meta device causes (code that reads a tensor's values), while validation builds
    the model there: it retries on the host (engine.run.validate)."""
    return torch.empty(0).device.type == "meta" and "meta" in str(exc).lower()


def module_device(module: nn.Module) -> torch.device:
    """Where the module's parameters are (the meta device when validating); the host for a module without."""
    first = next(module.parameters(), None)
    return first.device if first is not None else torch.device("cpu")
