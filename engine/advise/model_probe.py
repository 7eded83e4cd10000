"""The model, probed once on the first device: each block's forward and backward at two batch sizes (the planner's
timing, engine/planner/planning.py), its optimizer step and memory, and one whole training step.

Two sizes because a block's time is not proportional to its samples: a call costs something whatever its size,
and a pipeline's micro-batches or a replica's slice are smaller than the batch. Each block's time is read as a
line through the two (``_line``): ``PROFILE_MAX_BATCH`` samples or the batch if smaller, and a quarter of that.
The whole step (forward, loss, backward, optimizer, as engine/strategies/single.py runs it) less the blocks'
timed work is what every rank's step pays beside them (the loss, zeroing the gradients, the calls between the
blocks): ``ModelProbe.step_overhead_s``. Memory: each block's parameters, and what its backward keeps of its
forward (the tensors autograd saves, counted once each, without the parameters), per sample; for a model that is
not a chain of blocks, the whole model's saved tensors shared among its split units as their forward time is.
"""
from __future__ import annotations

import copy
import time

from engine.advise.results import BlockProbe, LinearPair, ModelProbe
from engine.config import ExperimentConfig
from engine.planner import planning
from engine.rules import effective_batch_size

REPEATS = 3   # the best of a few, after one to warm up, as the planner's timing


def probe_model(spec, config: ExperimentConfig, device: str, tensor_parallel_width: int) -> ModelProbe:
    started = time.perf_counter()
    large = max(1, min(effective_batch_size(config), planning.PROFILE_MAX_BATCH))
    small = max(1, large // 4)
    at_large, out_bytes = _best_of_rounds(spec, large, device)
    at_small = _best_of_rounds(spec, small, device)[0] if small < large else at_large
    param_bytes = _param_bytes(spec)
    saved = _saved_bytes(spec, large, device, [forward for forward, _ in at_large])
    optimizer = _optimizer_seconds(spec, config, device, param_bytes)
    whole = _whole_step(spec, config, large, device)
    # Timed one by one, each block pays a backward call of its own and its own passes over memory: together,
    # in one stage or one model, they take less (mlp 64x4: the blocks' sum 2.1 ms, the whole step 1.8). Their
    # times are scaled down to the whole step's where they add up to more; what the whole step takes beyond
    # them (the loss, zeroing the gradients) is the step's own cost.
    timed = sum(total for _, total in at_large)
    scale = min(1.0, max(0.0, whole - sum(optimizer)) / timed) if timed > 0 else 1.0
    blocks = []
    for i, ((f_small, t_small), (f_large, t_large)) in enumerate(zip(at_small, at_large, strict=True)):
        forward = _line(small, f_small * scale, large, f_large * scale)
        backward = _line(small, (t_small - f_small) * scale, large, (t_large - f_large) * scale)
        blocks.append(BlockProbe(spec.blocks[i][0], *forward, *backward, optimizer[i], param_bytes[i], out_bytes[i],
                                 saved[i]))
    states = 2.0 + (2.0 if config.optimizer == "adamw" else 0.0)   # parameter and gradient; AdamW's two moments
    return ModelProbe(blocks, large, whole, max(0.0, whole - timed * scale - sum(optimizer)), states,
                      _linear_pairs(spec, tensor_parallel_width), time.perf_counter() - started)


def _best_of_rounds(spec, samples: int, device: str, rounds: int = 2) -> tuple[list[tuple[float, float]], list[int]]:
    """Each block's (forward, forward and backward) seconds, the planner's timing (the best of its repeats) done
    ``rounds`` times and the best of each kept (a block's time on a busy machine is as often slowed as not), and
    the bytes per sample leaving each."""
    best: list[tuple[float, float]] = []
    for _ in range(rounds):
        infos = planning.block_costs(spec, samples, device)
        times = [(b.forward_s, b.cost_s) for b in infos]
        best = [(min(a[0], b[0]), min(a[1], b[1])) for a, b in zip(best, times, strict=True)] if best else times
    return best, [b.out_bytes for b in infos]


def _line(small: int, t_small: float, large: int, t_large: float) -> tuple[float, float]:
    """(time per call, time per sample) through two sizes' times; all per sample where only one size was timed,
    or where noise made the smaller size the slower."""
    t_small, t_large = max(0.0, t_small), max(0.0, t_large)
    if large <= small:
        return 0.0, t_large / large
    per_sample = max(0.0, (t_large - t_small) / (large - small))
    return max(0.0, t_large - per_sample * large), per_sample


def _units(spec) -> list:
    """The blocks, or a traced model's split units, as modules."""
    if not spec.traced:
        return [block for _, block in spec.blocks]
    named = dict(spec.module.named_modules())
    return [named[name] for name, _ in spec.blocks]


def _param_bytes(spec) -> list[int]:
    """Each unit's parameters' bytes; a traced model's parameters outside every unit (a position embedding held by
    the root) are counted with the first."""
    units = _units(spec)
    sizes = [sum(p.numel() * p.element_size() for p in unit.parameters()) for unit in units]
    if spec.traced:
        whole = sum(p.numel() * p.element_size() for p in spec.module.parameters())
        sizes[0] += max(0, whole - sum(sizes))
    return sizes


def _saved_bytes(spec, samples: int, device: str, forward_s: list[float]) -> list[int]:
    """What each unit's backward keeps of its forward, per sample."""
    import torch
    inputs, _ = spec.data.sample(samples)
    inputs = inputs.to(device)
    if not spec.traced:
        out, h = [], inputs
        for index, (_, block) in enumerate(spec.blocks):
            block = copy.deepcopy(block).to(device)
            cut = h.detach().requires_grad_(h.is_floating_point() and index > 0)
            with _SavedCounter(block) as counter:
                h = block(cut)
            out.append(counter.bytes // samples)
        return out
    model = copy.deepcopy(spec.module).to(device)
    with _SavedCounter(model) as counter, torch.enable_grad():
        model(inputs)
    total = counter.bytes // samples
    weight = sum(forward_s) or 1.0
    return [int(total * t / weight) for t in forward_s]


class _SavedCounter:
    """Counts the bytes of the tensors autograd saves for the backward inside it, each storage once, the module's
    own parameters left out (they are counted as parameters)."""

    def __init__(self, module):
        self._parameters = {p.untyped_storage().data_ptr() for p in module.parameters()}
        self._seen: set[int] = set()
        self.bytes = 0

    def __enter__(self):
        import torch

        def pack(tensor):
            try:
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key not in self._seen and key not in self._parameters:
                    self._seen.add(key)
                    self.bytes += storage.nbytes()
            except (RuntimeError, NotImplementedError):   # a tensor without storage (a sparse or wrapper tensor)
                pass
            return tensor
        self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        return False


def _optimizer_seconds(spec, config: ExperimentConfig, device: str, param_bytes: list[int]) -> list[float]:
    """The optimizer's step over the whole model (its best of ``REPEATS``), shared among the units by their
    parameters' bytes."""
    import torch

    from engine.precision import make_optimizer
    model = copy.deepcopy(spec.whole()).to(device)
    parameters = [p for p in model.parameters() if p.requires_grad]
    if not parameters:
        return [0.0] * len(param_bytes)
    for p in parameters:
        p.grad = torch.zeros_like(p)
    optimizer = make_optimizer(parameters, config)
    clock = planning.block_clock(device)
    best = float("inf")
    for repeat in range(REPEATS + 1):
        t0 = clock()
        optimizer.step()
        _synchronize(device)
        if repeat:
            best = min(best, clock() - t0)
    total = sum(param_bytes) or 1
    return [best * size / total for size in param_bytes]


def _whole_step(spec, config: ExperimentConfig, samples: int, device: str) -> float:
    """One device's whole training step, as engine/strategies/single.py runs it: its best of ``REPEATS``."""
    from engine.precision import make_optimizer
    model = copy.deepcopy(spec.whole()).to(device)
    optimizer = make_optimizer(model.parameters(), config)
    inputs, targets = spec.data.sample(samples)
    inputs, targets = inputs.to(device), targets.to(device)
    clock = planning.block_clock(device)
    best = float("inf")
    for repeat in range(REPEATS + 1):
        t0 = clock()
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        loss = spec.loss_fn(model(inputs), targets)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        _synchronize(device)
        if repeat:
            best = min(best, clock() - t0)
    return best


def _linear_pairs(spec, width: int) -> list[LinearPair]:
    """The pairs tensor parallelism would split ``width`` ways (none for a traced model, or one device)."""
    if width < 2 or spec.traced:
        return []
    from engine.strategies.tensor_parallel_plan import linear_pairs
    module = spec.whole()
    named = dict(module.named_modules())
    pairs = []
    for column, row in linear_pairs(module, width):
        first, second = named[column], named[row]
        size = sum(p.numel() * p.element_size() for layer in (first, second) for p in layer.parameters())
        pairs.append(LinearPair(size, first.in_features, second.out_features))
    return pairs


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize(device)
