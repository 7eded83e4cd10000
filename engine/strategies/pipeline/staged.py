"""Shared by model-parallel and pipeline: checks on split points and stages."""
from __future__ import annotations

from engine.problems import Problem


def check_stages(config, devices, n_blocks, per_device: int = 1) -> list[Problem]:
    found = []
    stages = len(devices) * per_device
    if len(devices) < 2:
        found.append(Problem("devices", f"{config.strategy} needs at least 2 devices (one per stage), "
                                        f"got {len(devices)}"))
    if stages > n_blocks:
        what = f"{stages} stages ({per_device} per device)" if per_device > 1 else f"{stages} stages"
        found.append(Problem("devices", f"{what} but the model has only {n_blocks} blocks; "
                                        f"use at most {n_blocks // per_device} devices"))
    if config.split is not None:
        split = config.split
        if len(split) + 1 != stages:
            where = f"{len(devices)} devices x {per_device} stages each" if per_device > 1 else f"{stages} devices"
            found.append(Problem("split", f"{len(split)} split point(s) make {len(split) + 1} stages, "
                                          f"but there are {where}"))
        for k in split:
            if k <= 0 or k >= n_blocks:
                found.append(Problem("split", f"split point {k} is out of range: each must be between 1 and "
                                              f"{n_blocks - 1} (the model has {n_blocks} blocks; 0 and "
                                              f"{n_blocks} are its ends)"))
    return found


def all_cpu(devices) -> bool:
    return all(d.kind == "cpu" for d in devices)


def distinct_processes(devices) -> bool:
    """Stages go to one process each when devices are all CPU virtual devices or distinct GPUs."""
    if all_cpu(devices):
        return True
    if all(d.kind == "cuda" for d in devices):
        return len({(d.node, d.index) for d in devices}) == len(devices)  # each node has its own cuda:0
    return False


def stage_devices(config, devices, per_device: int) -> list:
    """The device of each stage, in stage order: one stage per device, or ``per_device`` stages on each (the
    schedule's V, engine.rules.effective_stages_per_device) placed in a loop or a V
    (engine.strategies.pipeline.schedules)."""
    from engine.strategies.pipeline.schedules import SCHEDULE_INFO
    if per_device == 1:
        return list(devices)
    schedule = SCHEDULE_INFO[config.schedule]
    return [devices[schedule.stage_device(s, len(devices))] for s in range(len(devices) * per_device)]
