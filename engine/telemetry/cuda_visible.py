"""Which NVML GPU is CUDA's ``cuda:K``: CUDA_VISIBLE_DEVICES read as the CUDA runtime reads it.

Torch numbers the GPUs it may use 0, 1, ... in the order CUDA_VISIBLE_DEVICES
lists them; NVML ignores that variable and numbers every GPU of the machine. With
``CUDA_VISIBLE_DEVICES=2,3`` a run's ``cuda:0`` is NVML's GPU 2, and reading NVML's
GPU 0 for it would show another GPU's utilization. The ranks run with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (engine.worker), the order NVML counts in, so a
number in the list is an NVML index.

The CUDA runtime's rules, followed here: entries are indices or GPU UUIDs (or a
unique prefix of one, "GPU-8f2a"), MIG instances ("MIG-..."); the list ends at the
first entry that names no GPU, or repeats one; an empty value hides every GPU.
"""
from __future__ import annotations

import os
from typing import Mapping

from engine.telemetry import nvml

MIG = "MIG-"


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[int | None]:
    """The NVML index of ``cuda:0``, ``cuda:1``, ...; None for a MIG instance (no NVML telemetry here)."""
    environ = os.environ if environ is None else environ
    count = nvml.device_count()
    spec = environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return list(range(count))
    uuids: list[str] | None = None
    visible: list[int | None] = []
    for entry in (part.strip() for part in spec.split(",")):
        if entry.startswith(MIG):
            visible.append(None)
            continue
        if entry.lstrip("+-").isdigit():
            index = int(entry)
        elif entry.startswith("GPU-"):
            if uuids is None:
                uuids = [nvml.text(nvml.device_query(i, "nvmlDeviceGetUUID")) or "" for i in range(count)]
            matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)]
            index = matches[0] if len(matches) == 1 else -1
        else:
            index = -1
        if not 0 <= index < count or index in visible:
            break  # CUDA ignores this entry and every one after it
        visible.append(index)
    return visible


def nvml_index(cuda_index: int, environ: Mapping[str, str] | None = None) -> int | None:
    """NVML's index for ``cuda:cuda_index``; None when CUDA does not see that many GPUs or it is a MIG instance."""
    visible = visible_gpus(environ)
    return visible[cuda_index] if 0 <= cuda_index < len(visible) else None
