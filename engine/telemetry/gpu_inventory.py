"""The machine's GPUs as Splitscope lists them, above the NVML layer (nvml.py imports none of this).

``inventory()`` joins NVML's view of each GPU with CUDA's name for it and the
fields it offers; ``reset()`` forgets everything NVML-related in this process
(tests swap pynvml for a fake).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.telemetry import gpu_fields, nvml
from engine.telemetry.cuda_visible import visible_gpus


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML describes it."""
    index: int                  # NVML's index
    cuda_index: int | None      # what a run calls it, cuda:K; None: hidden by CUDA_VISIBLE_DEVICES
    name: str | None = None
    uuid: str | None = None
    memory_total: int | None = None
    driver_version: str | None = None
    fields: dict[str, bool] = field(default_factory=dict)   # each DeviceSample field: whether NVML offers it
    lost: bool = False          # fell off the bus (NVML_ERROR_GPU_IS_LOST)
    notes: list[str] = field(default_factory=list)          # why fields are not offered (gpu_fields.gpu_counter_notes)


def inventory() -> list[GpuInfo]:
    """Per GPU: NVML index, CUDA index, name, uuid, memory total, driver, and which fields NVML offers.

    For ``python main.py devices``. ``fields`` maps each DeviceSample field (and
    ``util_samples``, the driver-buffered utilization) to whether this GPU
    supports it; each field is probed once per process, and ``notes`` says why GPM's are not
    (``gpu_fields.gpu_counter_notes``). An empty list without NVML.
    nvidia-smi equivalent: ``nvidia-smi -q`` (``--query-gpu=name,uuid,memory.total``).
    """
    driver = nvml.driver_version()
    cuda_index = {index: k for k, index in enumerate(visible_gpus()) if index is not None}
    gpus = []
    for index in range(nvml.device_count()):
        memory = nvml.device_query(index, "nvmlDeviceGetMemoryInfo")
        gpus.append(GpuInfo(index=index, cuda_index=cuda_index.get(index),
                            name=nvml.text(nvml.device_query(index, "nvmlDeviceGetName")),
                            uuid=nvml.text(nvml.device_query(index, "nvmlDeviceGetUUID")),
                            memory_total=getattr(memory, "total", None), driver_version=driver,
                            fields=gpu_fields.probe(index).sample_fields(), lost=nvml.is_lost(index),
                            notes=gpu_fields.gpu_counter_notes(index)))
    return gpus


def reset() -> None:
    """Shut NVML down and forget every cache: the wrapper's and the field probes."""
    nvml.reset()
    gpu_fields.forget_probes()
