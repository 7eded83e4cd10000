"""Which NVML GPU is CUDA's ``cuda:K``: CUDA_VISIBLE_DEVICES read as the CUDA runtime reads it.

Torch numbers the GPUs it may use 0, 1, ... in the order CUDA_VISIBLE_DEVICES
lists them; NVML ignores that variable and numbers every GPU of the machine. With
``CUDA_VISIBLE_DEVICES=2,3`` a run's ``cuda:0`` is NVML's GPU 2, and reading NVML's
GPU 0 for it would show another GPU's utilization. The ranks run with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (engine.run.worker), the order NVML counts in, so a
number in the list is an NVML index.

The rules are torch's own (``torch.cuda._parse_visible_devices`` and
``_transform_uuid_to_ordinals``, which follow the CUDA runtime): the first entry
decides the list's kind. Numbers are read like C's strtoul ("1gpu2" is 1; ASCII
digits only, as strtoul reads them, where torch's Python copy also takes "３"); the
list ends at a negative number or one past the last GPU. UUIDs ("GPU-8f2a...", or a
unique prefix of one) end at the first entry without the prefix, or naming no GPU
or several. A MIG list gives the process one MIG instance, which runs, but NVML
telemetry here does not read it. A repeated entry hides every GPU, as does an
empty value.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from engine.environment import variable
from engine.telemetry import nvml

_LEADING_NUMBER = re.compile(r"[+-]?[0-9]+")


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[int | None]:
    """The NVML index of ``cuda:0``, ``cuda:1``, ...; None for a MIG instance (no NVML telemetry here)."""
    count = nvml.device_count()
    spec = variable("CUDA_VISIBLE_DEVICES", env=environ)
    if spec is None:
        return list(range(count))
    for prefix in ("GPU-", "MIG-"):
        if spec.startswith(prefix):
            entries: list[str] = []
            for entry in spec.split(","):
                if entry in entries:
                    return []
                if not entry.startswith(prefix):
                    break
                entries.append(entry)
            if prefix == "MIG-":  # a process sees one MIG instance (torch asks the CUDA runtime)
                return [None] if entries else []
            return _uuid_indices(entries, count)
    listed: list[int] = []
    for entry in spec.split(","):
        match = _LEADING_NUMBER.match(entry.strip())
        index = int(match.group()) if match else -1
        if index in listed:  # a repeat anywhere before the list ends, even past the last GPU
            return []
        if index < 0:
            break
        listed.append(index)
    visible: list[int | None] = []
    for index in listed:
        if index >= count:
            break
        visible.append(index)
    return visible


def _uuid_indices(prefixes: list[str], count: int) -> list[int | None]:
    uuids = [nvml.text(nvml.device_query(i, "nvmlDeviceGetUUID")) or "" for i in range(count)]
    indices: list[int | None] = []
    for prefix in prefixes:
        matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(prefix)]
        if len(matches) != 1:
            break
        if matches[0] in indices:
            return []
        indices.append(matches[0])
    return indices
