"""The machine a report was made on: versions, cores, GPUs and driver, as label/value rows.

torch's version is read from its installed metadata, never by importing it: an
export must stay fast and work where torch is broken or missing. NVML answers
"not available" instead of raising (engine.telemetry.nvml).
"""
from __future__ import annotations

import importlib.metadata
import os
import platform

from engine.devices import gpu_label, usable_cores
from engine.telemetry import gpu_inventory, nvml


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _gpus() -> str:
    gpus = gpu_inventory.inventory()
    if not gpus:
        why = nvml.start_error()
        return "none" + (f" (NVML: {why})" if why else "")
    described = []
    for gpu in gpus:
        memory = gpu.memory_total
        size = f", {memory / 2 ** 30:.1f} GiB" if isinstance(memory, (int, float)) else ""
        described.append(f"{gpu_label(gpu)} {gpu.name or 'unknown GPU'}{size}")
    return "; ".join(described)


def environment() -> list[tuple[str, str]]:
    return [
        ("torch", package_version("torch")),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("platform", platform.platform()),
        ("CPU", platform.processor() or platform.machine()),
        ("CPU cores", f"{os.cpu_count() or 'unknown'} logical, {len(usable_cores())} usable by this process"),
        ("GPUs", _gpus()),
        ("NVIDIA driver", nvml.driver_version() or "not available"),
    ]
