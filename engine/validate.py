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


def batch_norm_note(config: ExperimentConfig, has_batch_norm: bool, devices: int) -> str | None:
    """Why a model with BatchNorm trains differently under this run than on one device, if it does."""
    info = strategies.info(config.strategy)
    if not has_batch_norm:
        return None
    if info.data_parallel and devices > 1:
        part = "each replica's slice of the batch"
    elif info.uses_micro_batches and config.effective_micro_batches > 1:
        part = "each micro-batch"
    else:
        return None
    return (f"the model has BatchNorm: its statistics come from {part}, not the whole batch, so training "
            "differs from one device's (parameters do not match a single-device run)")


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
    note = batch_norm_note(config, spec.has_batch_norm, len(devices))
    if note:
        warnings.append(note)
    if devices_mod.oversubscribed(devices):
        warnings.append(f"{sum(d.kind == 'cpu' for d in devices)} CPU virtual devices on "
                        f"{len(devices_mod.usable_cores())} cores: devices share cores, so timings mean little")
    return RunPlan(devices, impl.world_size(config, devices), n_blocks, spec.block_names, warnings), []


def resolve_split_names(config: ExperimentConfig, tokens: list[int | str]) -> tuple[int, ...]:
    """Split points given by index or by block name: "layer3.0", or "layer3" for the first block
    inside layer3 (the tutorial's ``seq2`` starts there). Raises ConfigError naming what exists."""
    found = config_mod.problems(config.replace(split=None))
    if found:
        raise config_mod.ConfigError(found)
    spec, problem = _build_model(config)
    if problem:
        raise config_mod.ConfigError([problem])
    names = spec.block_names
    points = []
    for token in tokens:
        if isinstance(token, int):
            points.append(token)
            continue
        index = next((i for i, name in enumerate(names) if name == token or name.startswith(token + ".")), None)
        if index is None:
            raise config_mod.ConfigError([Problem("split", f"no block named {token!r} in {spec.name}; its blocks: "
                                                           f"{', '.join(names)}")])
        points.append(index)
    return tuple(points)


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
