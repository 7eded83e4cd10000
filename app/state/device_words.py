"""Devices in the app's words, without Qt: the Devices box's choices and the status line's count.

A choice's text names the devices a run will have ("2 CPU devices (cpu:0, cpu:1)"), the
names its plots use, while the config keeps the spec ("cpu:2"); ``engine.devices.describe``
words them, so the checks and the box say the same.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine import devices as devices_mod
from engine.config import ExperimentConfig


@dataclass(frozen=True)
class DeviceChoice:
    spec: str   # what the config and the command line take: "cpu:2"
    text: str   # what the box shows: "2 CPU devices (cpu:0, cpu:1)"
    tip: str


AUTO_TEXT = "auto: GPUs when there are enough for the strategy, else CPU devices"


def device_choices(cores: int, gpus: list) -> list[DeviceChoice]:
    """The choices offered on a machine of ``cores`` cores and ``gpus`` (the GPU inventory)."""
    core_list = list(range(max(1, cores)))
    choices = [DeviceChoice("auto", AUTO_TEXT, "GPUs when there are enough for the strategy, else CPU virtual "
                                               "devices, one pinned core each")]
    for n in sorted({1, 2, 3, 4, cores, 8}):
        spec = f"cpu:{n}"
        devices = devices_mod.cpu_devices(n, core_list)
        if devices_mod.oversubscribed(devices, core_list):
            text = f"{devices_mod.describe(devices)}, sharing {cores} core{'s' if cores != 1 else ''}"
            tip = devices_mod.sharing_note(devices, core_list)
        else:
            text = devices_mod.describe(devices)
            tip = f"{n} CPU virtual device{'s' if n > 1 else ''}, each pinned to a core of its own"
        choices.append(DeviceChoice(spec, text, tip))
    usable = devices_mod.cuda_visible(gpus)
    for k in range(1, len(usable) + 1):
        spec = ",".join(devices_mod.gpu_label(g) for g in usable[:k])
        devices = devices_mod.parse(spec, k, gpus=len(usable), cores=core_list)
        choices.append(DeviceChoice(spec, devices_mod.describe(devices),
                                    " + ".join(g.name or "GPU" for g in usable[:k])))
    if usable:
        spec = "cpu,cuda:0"
        devices = devices_mod.parse(spec, 2, gpus=len(usable), cores=core_list)
        choices.append(DeviceChoice(spec, f"{devices_mod.describe(devices)}, mixed",
                                    "mixed placement, as the tutorials' DistributedModel"))
    return choices


def hardware_text(cores: int, gpus: list) -> str:
    """"2 cores for CPU virtual devices · cuda:0 NVIDIA H100, 80 GiB": what this machine offers the form."""
    parts = [f"{cores} core{'s' if cores != 1 else ''} for CPU virtual devices"]
    for g in gpus:
        mem = f", {g.memory_total / 2 ** 30:.0f} GiB" if g.memory_total else ""
        parts.append(f"{devices_mod.gpu_label(g)} {g.name or 'GPU'}{mem}")
    return " · ".join(parts if gpus else [*parts, "no CUDA GPU"])


def sampled_text(names: list[str]) -> str:
    """What the telemetry samples, counted as the machine has it: "2 cores", "2 cores, 1 GPU".

    ``names`` are the telemetry's series (``TelemetryHistory.devices``): cores ("core 0") and GPUs
    ("cuda:0"); a CPU virtual device ("cpu:3") is a core's work, not a device of the machine.
    """
    cores = sum(1 for n in names if n.startswith("core "))
    gpus = sum(1 for n in names if n.startswith("cuda:"))
    remote = sum(1 for n in names if devices_mod.node_of(n) is not None)  # a run over nodes: their devices
    parts = [f"{cores} core{'s' if cores != 1 else ''}"] if cores or not (gpus or remote) else []
    if gpus:
        parts.append(f"{gpus} GPU{'s' if gpus != 1 else ''}")
    if remote:
        nodes = len({devices_mod.node_of(n) for n in names} - {None})
        parts.append(f"{remote} device{'s' if remote != 1 else ''} on {nodes} node{'s' if nodes != 1 else ''}")
    return ", ".join(parts)


def sharing_warning(config: ExperimentConfig, cores: int, gpus: int = 0) -> str | None:
    """What the configured devices' sharing of cores does to the figures (``engine.devices.sharing_note``), or
    None when each CPU device has a core of its own or the spec is wrong (the check says why)."""
    from engine.run.resolved_run import run_devices  # torch-free at import
    if config.nodes:  # the nodes' cores, not this machine's
        return None
    core_list = list(range(max(1, cores)))
    try:
        devices = run_devices(config, gpus=gpus, cores=core_list)
    except devices_mod.DeviceError:
        return None
    return devices_mod.sharing_note(devices, core_list)
