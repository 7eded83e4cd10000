"""Which targets to sample: a run's devices, or everything for the idle view."""
from __future__ import annotations

from typing import Protocol

from engine.cores import usable_cores
from engine.telemetry.cpu_target import CpuTarget
from engine.telemetry.cuda_visible import visible_gpus
from engine.telemetry.gpu_target import GpuTarget

Target = CpuTarget | GpuTarget


class Sampled(Protocol):
    """What telemetry reads of a run's device (engine.devices.Device has it; engine.devices asks telemetry for
    the GPUs CUDA sees, so telemetry does not import it back)."""
    name: str
    kind: str
    index: int
    core: int | None
    node: str | None


def targets_for(devices: list[Sampled]) -> list[Target]:
    """One target per device of a run, named like the device ("cpu:0", "cuda:1").

    A device listed twice (two stages sharing cuda:0) is one device to sample.
    CPU virtual devices have no pid yet: the caller sets it with
    ``TelemetrySampler.set_pid`` once the worker reports its ranks.
    """
    targets: list[Target] = []
    visible = visible_gpus() if any(d.kind == "cuda" for d in devices) else []
    for device in {d.name: d for d in devices}.values():
        if device.kind == "cuda":
            # cuda:K is the K-th GPU CUDA_VISIBLE_DEVICES lets torch see. Past the end (no GPU here;
            # validation refuses such runs) there is none to read, and the target says so.
            index = visible[device.index] if device.index < len(visible) else None
            targets.append(GpuTarget(device.name, index))
        elif device.kind == "cpu" and device.core is None and device.node is None:
            # unpinned (a plain script: engine/strategies/script.py): every core this process may use
            cores = tuple(usable_cores())
            targets.append(CpuTarget(device.name, cores[0], own_work=True, cores=cores))
        elif device.kind == "cpu":
            core = device.core if device.core is not None else device.index
            targets.append(CpuTarget(device.name, core, own_work=True))
        else:
            raise ValueError(f"{device.name}: no telemetry for device kind {device.kind!r}; "
                             "allowed: 'cpu', 'cuda'")
    return targets


def physical_name(device: Sampled) -> str:
    """The name of what a device's utilization measures: its core ("core 3") for a CPU virtual device,
    the GPU itself ("cuda:1") otherwise. The idle view samples the same names, so a core is one series.
    A device of another machine (a run over nodes) is its own series: this machine's cores are not its."""
    if device.node is not None:
        return device.name
    if device.kind == "cpu" and device.core is None:
        return "all cores"
    if device.kind == "cpu":
        return f"core {device.core}"
    return device.name


def all_targets() -> list[Target]:
    """Every GPU ("cuda:N") and every core this process may use ("core N"): the idle view."""
    gpus: list[Target] = [GpuTarget(f"cuda:{k}", index) for k, index in enumerate(visible_gpus())]
    return gpus + [CpuTarget(f"core {core}", core) for core in usable_cores()]
