"""Where to split: per-block cost from a quick timing, and the balanced split.

The balanced split puts contiguous blocks on each stage so that the slowest
stage is as fast as it can be (a pipeline runs at the pace of its slowest stage).
"""
from __future__ import annotations

import time
from contextlib import nullcontext

from engine.wire.planner import BlockInfo  # the planner channel carries it: declared there, once

PROFILE_MAX_BATCH = 256  # costs scale with the batch; a slice keeps the timing quick
PROFILE_REPEATS = 3      # the minimum of a few repeats resists a noisy machine (the first, counted, not among them)


def block_clock(device: str):
    """The clock a block's cost is read on. On a CPU device, the process's CPU time: the block's work,
    not the wait for a core that other programs share (with a busy loop on its core, wall-clock timing
    of 3 and 6 ms blocks read 3-8 and 15 ms, CPU time 4-5 and 9-10 ms, so a split balanced on wall-clock
    time followed whichever block the scheduler interrupted). On a GPU, wall time after a synchronize:
    the kernels' time, which the host's CPU time does not see. A split over a CPU and a GPU stage thus
    compares a CPU stage's work without the contention its run may meet with a GPU stage's wall time."""
    return time.perf_counter if device.startswith("cuda") else time.process_time


def block_costs(spec, batch_size: int, device: str = "cpu", progress=None) -> list[BlockInfo]:
    """Time each block's forward and backward on ``device``, block by block; ``progress(fraction)`` after
    each block timed (a heavy model's profile takes seconds; the caller may raise in it to stop)."""
    import copy

    import torch

    from engine.measure.flops import DeviceFlops
    n = max(1, min(batch_size, PROFILE_MAX_BATCH))
    inputs, _ = spec.data.sample(n)
    report = progress or (lambda fraction: None)
    if spec.traced:
        return _traced_unit_costs(spec, inputs, device, report)
    # Copies: profiling must not touch the run's parameters or BatchNorm statistics.
    blocks = [copy.deepcopy(block).to(device) for _, block in spec.blocks]
    best = [float("inf")] * len(blocks)
    best_forward = [float("inf")] * len(blocks)
    out_bytes = [0] * len(blocks)
    flops = [DeviceFlops(device) for _ in blocks]
    clock = block_clock(device)
    for repeat in range(PROFILE_REPEATS):
        h = inputs.to(device)
        for i, block in enumerate(blocks):
            report((repeat * len(blocks) + i) / (PROFILE_REPEATS * len(blocks)))
            # As in training: the model's input needs no gradient, so the first block's backward
            # skips one matmul per layer that every later block's does (a quarter of a 4-layer stage's work).
            cut = h.detach().requires_grad_(h.is_floating_point() and i > 0)
            with counted_once(flops[i], repeat):   # the first repeat, a warm-up the best leaves out
                t0 = clock()
                out = block(cut)
                if device.startswith("cuda"):
                    torch.cuda.synchronize(device)
                forward_seconds = clock() - t0
                if out.requires_grad:
                    # A gradient of ones, as the sum's: backward(ones) would import torch's symbolic shapes and
                    # sympy on first use (0.7 s of the app's first profile), for a shape check a sum does not need.
                    out.sum().backward()
                if device.startswith("cuda"):
                    torch.cuda.synchronize(device)
                seconds = clock() - t0
            if repeat > 0 or PROFILE_REPEATS == 1:
                best[i] = min(best[i], seconds)
                best_forward[i] = min(best_forward[i], forward_seconds)
            out_bytes[i] = out.numel() * out.element_size() // n
            h = out.detach()
    return [BlockInfo(name, sum(p.numel() for p in block.parameters()), cost, size, type(block).__name__,
                      count.by_device.get(device, 0) / n, forward)
            for (name, _), block, cost, size, count, forward in zip(spec.blocks, blocks, best, out_bytes, flops,
                                                                    best_forward, strict=True)]


def counted_once(flops, repeat: int):
    """Count a block's FLOPs on the first repeat of its profile (engine/measure/flops.py), which its first
    calls' set-up slows anyway: the best time is the other repeats'."""
    return flops.counting() if repeat == 0 else nullcontext()


def _traced_unit_costs(spec, inputs, device: str, report) -> list[BlockInfo]:
    """Each split unit of a module that is not a chain of blocks, timed as a stage of its own: a copy of the
    module traced with a stage per unit (engine.models.traced_chain)."""
    import copy

    import torch

    from engine.measure.flops import DeviceFlops
    from engine.models import traced_chain, tracing
    model = copy.deepcopy(spec.module)  # tracing annotates the module it traces
    units = [(name, dict(model.named_modules())[name]) for name, _ in spec.blocks]
    pipe = tracing.cut(spec.__class__(spec.name, units, spec.loss_fn, spec.data, module=model),
                       tuple(range(1, len(units))), inputs)
    for k in range(pipe.num_stages):
        tracing.stage_on(pipe, k, device)
    n = inputs.shape[0]
    best = [float("inf")] * len(units)
    best_forward = [float("inf")] * len(units)
    out_bytes = [0] * len(units)
    flops = [DeviceFlops(device) for _ in units]
    clock = block_clock(device)

    def timed(k, call):
        report((repeat * len(units) + k) / (PROFILE_REPEATS * len(units)))
        with counted_once(flops[k], repeat):
            t0 = clock()
            out = call()
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
            forward_seconds = clock() - t0
            traced_chain.backward_with_ones(out)
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
            seconds = clock() - t0
        if repeat > 0 or PROFILE_REPEATS == 1:
            best[k] = min(best[k], seconds)
            best_forward[k] = min(best_forward[k], forward_seconds)
        out_bytes[k] = traced_chain.output_bytes(out) // n
        return out
    for repeat in range(PROFILE_REPEATS):  # noqa: B007  (timed, called in the loop, reads it)
        traced_chain.run_each_stage(pipe, inputs.to(device), timed)
    return [BlockInfo(name, sum(p.numel() for p in unit.parameters()), cost, size, type(unit).__name__,
                      count.by_device.get(device, 0) / n, forward)
            for (name, unit), cost, size, count, forward in zip(spec.blocks, best, out_bytes, flops, best_forward,
                                                                strict=True)]


def balanced_split(costs: list[float], stages: int) -> tuple[int, ...]:
    """Split points minimizing the costliest stage (each stage at least one block)."""
    n = len(costs)
    if not 1 <= stages <= n:
        raise ValueError(f"cannot make {stages} stages from {n} blocks")
    return balanced_split_per_stage([costs] * stages)


def balanced_split_per_stage(stage_costs: list[list[float]]) -> tuple[int, ...]:
    """Split points minimizing the costliest stage, each block costing what it costs on its stage's device
    (a CPU stage and a GPU stage time the same block very differently)."""
    stages, n = len(stage_costs), len(stage_costs[0])
    if not 1 <= stages <= n:
        raise ValueError(f"cannot make {stages} stages from {n} blocks")
    prefixes = []
    for costs in stage_costs:
        prefix = [0.0]
        for c in costs:
            prefix.append(prefix[-1] + c)
        prefixes.append(prefix)
    inf = float("inf")
    # best[k][j]: minimal max-stage cost placing the first j blocks on k stages
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        prefix = prefixes[k - 1]
        for j in range(k, n - (stages - k) + 1):
            for i in range(k - 1, j):
                value = max(best[k - 1][i], prefix[j] - prefix[i])
                if value < best[k][j]:
                    best[k][j], cut[k][j] = value, i
    points, j = [], n
    for k in range(stages, 0, -1):
        j = cut[k][j]
        points.append(j)
    return tuple(sorted(points)[1:])  # drop the leading 0


def time_blocks_per_kind(spec, batch_size: int, devices, progress=None) -> dict[str, list[BlockInfo]]:
    """Each block timed on each kind of device among ``devices`` ("cpu", "cuda"), the first device of a
    kind standing for the rest (devices of one kind are taken to be alike); "cpu" when none is given.
    ``progress(fraction)`` of the whole, as ``block_costs``."""
    where: dict[str, str] = {}
    for d in devices:
        where.setdefault(d.kind, d.torch_device)
    kinds = list((where or {"cpu": "cpu"}).items())
    report = progress or (lambda fraction: None)
    return {kind: block_costs(spec, batch_size, device, lambda f, k=k: report((k + f) / len(kinds)))
            for k, (kind, device) in enumerate(kinds)}


def balanced_for_kinds(costs_by_kind: dict[str, list[float]], stage_kinds: list[str]) -> tuple[int, ...]:
    """The balanced split with each stage's blocks costed on its own kind of device (a CPU stage and a
    GPU stage time the same block very differently)."""
    first = next(iter(costs_by_kind.values()))
    return balanced_split_per_stage([costs_by_kind.get(kind, first) for kind in stage_kinds])


def plan_balanced(spec, batch_size: int, devices) -> tuple[list[BlockInfo], tuple[int, ...]]:
    """Blocks timed per kind of stage device, and the split that balances the stages with those times.
    Returns the first device's block timings (what the split view shows) and the split."""
    timed = time_blocks_per_kind(spec, batch_size, devices)
    split = balanced_for_kinds({kind: [b.cost_s for b in infos] for kind, infos in timed.items()},
                               [d.kind for d in devices])
    return timed[devices[0].kind], split


def stage_shares(blocks: list[BlockInfo], split: tuple[int, ...]) -> list[dict]:
    """Per stage: first/last block, share of parameters and of measured time, bytes per sample leaving it."""
    edges = (0, *split, len(blocks))
    total_params = sum(b.params for b in blocks) or 1
    total_cost = sum(b.cost_s for b in blocks) or 1.0
    out = []
    for a, b in zip(edges[:-1], edges[1:], strict=False):
        part = blocks[a:b]
        if not part:
            out.append({"first": a, "last": b - 1, "params": 0.0, "time": 0.0, "crossing": 0})
            continue
        out.append({"first": a, "last": b - 1,
                    "params": sum(x.params for x in part) / total_params,
                    "time": sum(x.cost_s for x in part) / total_cost,
                    "crossing": part[-1].out_bytes if b < len(blocks) else 0})
    return out
