"""Every way advise considers to run a model on the devices: single, ddp, fsdp, tensor parallel, the naive split,
and each pipeline schedule at each micro-batch count and stages per device, over the balanced split and its
neighbours; and which of them the strategies accept for this model (their own ``check`` and ``model_problems``,
as a run's validation asks them: engine/run/validate.py).

The micro-batch counts are the what-if's (engine/planner/what_if.py ``MICRO_BATCH_COUNTS``) that divide the batch;
one micro-batch is the naive split's (model-parallel). The balanced split is the planner's
(engine/planner/planning.py) for the blocks' forward and backward time at the micro-batch's size, and its
neighbours move one split point by one block: on a busy machine the probe's times are a few per cent off, and a
neighbour may be the split that runs best. nn.DataParallel (one process) and fsdp+tp are not considered: the
first is ddp's slower form, the second needs four devices and pairs of linear layers and is left to a sweep.
"""
from __future__ import annotations

from collections.abc import Callable

from engine import rules, strategies
from engine.advise.results import Candidate
from engine.config import ExperimentConfig
from engine.devices import Device
from engine.planner.planning import balanced_split
from engine.planner.what_if import MICRO_BATCH_COUNTS
from engine.strategies.pipeline.schedules import SCHEDULE_LIST

WHOLE_MODEL = ("ddp", "fsdp", "tensor-parallel")   # on every device, each a process


def device_spec(devices: list[Device]) -> str:
    """``--devices`` as ``run`` takes it for these devices: "cpu:N" for CPU virtual devices, else their names."""
    if all(d.kind == "cpu" for d in devices):
        return f"cpu:{len(devices)}"
    return ",".join(d.name for d in devices)


def enumerate_candidates(devices: list[Device], n_blocks: int, batch_size: int,
                         block_costs: Callable[[float], list[float]]) -> list[Candidate]:
    """Every candidate, before any strategy's checks; ``block_costs(samples)``: each block's forward and backward
    time at that many samples, what the balanced split balances."""
    everywhere = device_spec(devices)
    found = [Candidate("single", device_spec(devices[:1]))]
    n = len(devices)
    if n < 2:
        return found
    found += [Candidate(name, everywhere) for name in WHOLE_MODEL]
    if n <= n_blocks:
        found += [Candidate("model-parallel", everywhere, list(split))
                  for split in neighbourhood(balanced_split(block_costs(batch_size), n), n_blocks)]
    for schedule in SCHEDULE_LIST:
        for per_device in schedule.stages_per_device:
            stages = n * per_device
            if stages > n_blocks:
                continue
            for m in MICRO_BATCH_COUNTS:
                if m < 2 or batch_size % m or schedule.micro_batch_problem(m, n, per_device):
                    continue
                balanced = balanced_split(block_costs(batch_size / m), stages)
                found += [Candidate("pipeline", everywhere, list(split), schedule.name, m,
                                    per_device if per_device > 1 else None)
                          for split in neighbourhood(balanced, n_blocks)]
    return found


def neighbourhood(split: tuple[int, ...], n_blocks: int) -> list[tuple[int, ...]]:
    """The split, then each split point moved one block earlier or later where the points stay in order."""
    found = [tuple(split)]
    for index in range(len(split)):
        for step in (-1, 1):
            moved = split[:index] + (split[index] + step,) + split[index + 1:]
            bounds = (0, *moved, n_blocks)
            if all(a < b for a, b in zip(bounds, bounds[1:], strict=False)) and moved not in found:
                found.append(moved)
    return found


def accepted(candidates: list[Candidate], base: ExperimentConfig, spec, devices_of: Callable[[str], list[Device]]
             ) -> list[Candidate]:
    """The candidates whose config has no problem on its own (engine.rules) and that their strategy accepts for
    these devices and this model (``check``, ``model_problems``: tensor parallel only where the model has pairs of
    linear layers to split)."""
    model_refusals: dict[tuple[str, str], bool] = {}
    kept = []
    for candidate in candidates:
        config = configured(base, candidate)
        if rules.problems(config):
            continue
        strategy = strategies.get(candidate.strategy)
        devices = devices_of(candidate.devices)
        if strategy.check(config, devices, len(spec.blocks)):
            continue
        key = (candidate.strategy, candidate.devices)
        if key not in model_refusals:
            model_refusals[key] = bool(strategy.model_problems(config, spec, devices))
        if not model_refusals[key]:
            kept.append(candidate)
    return kept


def configured(base: ExperimentConfig, candidate: Candidate) -> ExperimentConfig:
    """The base config (model, batch, optimizer, ...) run as ``candidate``."""
    return base.replace(**candidate.options())
