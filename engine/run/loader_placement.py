"""Where a run's DataLoader workers run (``--input-prep loader``): the cores ``--loader-cores`` names, else the
cores of the machine that no device of the run holds there. On CPU virtual devices each device is one pinned
core, and workers on a device's core would take its time unseen: where they must share one, validation says
so (``placement_note``). Torch-free: validation and the rank both read it."""
from __future__ import annotations

from engine.config import ExperimentConfig
from engine.cores import parse_cores
from engine.devices import Device
from engine.problems import Problem


def held_cores(devices: list[Device], node: str | None = None) -> set[int]:
    """The cores the run's CPU devices are pinned to on ``node`` (None: this machine)."""
    return {d.core for d in devices if d.core is not None and d.node == node}


def worker_cores(config: ExperimentConfig, devices: list[Device], usable: list[int],
                 node: str | None = None) -> list[int]:
    """The cores the loader's workers run on; [] where none is free (they then stay on their rank's core)."""
    if config.loader_cores:
        return parse_cores(config.loader_cores)
    held = held_cores(devices, node)
    return [c for c in usable if c not in held]


def placement_problems(config: ExperimentConfig, usable: list[int]) -> list[Problem]:
    """--loader-cores naming a core this machine does not let the run use."""
    if config.input_prep != "loader" or not config.loader_cores or config.nodes:
        return []
    missing = sorted(set(parse_cores(config.loader_cores)) - set(usable))
    if missing:
        return [Problem("loader_cores", f"core {', '.join(map(str, missing))} is not among this machine's usable "
                                        f"cores ({', '.join(map(str, usable))})")]
    return []


def placement_note(config: ExperimentConfig, devices: list[Device], usable: list[int]) -> str | None:
    """Said before the run when the workers share cores with the devices: their decoding then takes the
    devices' time, and the input wait measured is not that of a loader on cores of its own."""
    if config.input_prep != "loader" or config.loader_workers < 1 or config.nodes:
        return None
    held = held_cores(devices)
    cores = worker_cores(config, devices, usable)
    workers = f"the loader's {config.loader_workers} worker{'s' if config.loader_workers > 1 else ''}"
    if not cores:
        return (f"{workers} have no core of their own (every usable core runs a device), so they run on "
                "their rank's core and its time is theirs too; use fewer --devices or name --loader-cores")
    shared = sorted(set(cores) & held)
    if shared:
        return (f"{workers} share core {', '.join(map(str, shared))} with the run's devices: that time is "
                "theirs too")
    return None


def sampled_cores(config: ExperimentConfig, devices: list[Device], usable: list[int]) -> list[int]:
    """The cores the workers have to themselves on this machine, which telemetry samples beside the devices
    (``LOADER_SERIES``): their load is the loader's (and any other program's there)."""
    if config.input_prep != "loader" or config.loader_workers < 1 or config.nodes:
        return []
    held = held_cores(devices)
    return [c for c in worker_cores(config, devices, usable) if c not in held and c in usable]


LOADER_SERIES = "loader (core {})"   # the name its cores are sampled under: "loader (core 1)", beside the devices
