"""Full validation of a config, before anything launches.

``config.problems`` checks the options on their own; here the devices are
resolved and the model is built (it imports torch), so split points, stages and
model files are checked too. Every problem is reported at once.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine import config as config_mod
from engine import devices as devices_mod
from engine import strategies
from engine.config import ExperimentConfig, Problem


@dataclass(frozen=True)
class RunPlan:
    """What a valid config resolves to."""
    devices: list[devices_mod.Device]
    world_size: int
    n_blocks: int
    block_names: list[str]
    warnings: list[str]


def devices_needed(config: ExperimentConfig) -> int:
    """How many devices a spec that leaves it open ("auto") should get."""
    if config.strategy == "single":
        return 1
    if config.split is not None:
        return len(config.split) + 1
    return 2


def check(config: ExperimentConfig) -> list[Problem]:
    return plan(config)[1]


def plan(config: ExperimentConfig) -> tuple[RunPlan | None, list[Problem]]:
    found = config_mod.problems(config)
    devices: list[devices_mod.Device] = []
    try:
        devices = devices_mod.parse(config.devices, devices_needed(config))
    except devices_mod.DeviceError as exc:
        found.append(Problem("devices", str(exc)))
    spec = None
    if found:  # building a model from invalid options could fail or take all memory
        return None, found
    if config.model_file or config.model in config_mod.models.MODELS:
        spec, problem = _build_model(config)
        if problem:
            found.append(problem)
    if found or spec is None:
        return None, found
    n_blocks = len(spec.blocks)
    impl = strategies.load(config.strategy)
    found.extend(impl.check(config, devices, n_blocks))
    if found:
        return None, found
    warnings = []
    if devices_mod.oversubscribed(devices):
        warnings.append(f"{sum(d.kind == 'cpu' for d in devices)} CPU virtual devices on "
                        f"{len(devices_mod.usable_cores())} cores: devices share cores, so timings mean little")
    return RunPlan(devices, impl.world_size(config, devices), n_blocks, spec.block_names, warnings), []


def _build_model(config: ExperimentConfig):
    import torch

    from engine.models import build
    from engine.models.custom import ModelFileError
    try:
        # On the meta device: the blocks' structure without their memory, so checking a
        # 16384-wide model takes no gigabytes and resnet50 builds in a blink.
        with torch.device("meta"):
            return build.build(config), None
    except ModelFileError as exc:
        return None, Problem("model_file", str(exc))
    except (RuntimeError, ValueError, MemoryError) as exc:
        return None, Problem("model", f"could not build {config.model}: {type(exc).__name__}: {exc}")
