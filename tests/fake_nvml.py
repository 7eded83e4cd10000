"""A fake ``pynvml`` module: the one stand-in this project allows (no GPU here).

It answers the NVML functions engine.telemetry calls from ``FakeGpu`` objects
whose fields a test sets. Constants and the NVMLError classes are the real
nvidia-ml-py ones (that module imports without a driver), so error handling is
tested against the exceptions real NVML raises. Install it with
``monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([...]))`` and
``engine.telemetry.gpu_inventory.reset()``.
"""
from __future__ import annotations

import time
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml as real_pynvml


@dataclass
class FakeGpu:
    """One GPU as NVML would report it; a test changes fields between polls."""
    name: str = "NVIDIA Fake H200"
    uuid: str = "GPU-00000000-fake"
    util_gpu: int = 87
    util_memory: int = 41
    mem_used: int = 3 * 2**30
    mem_total: int = 141 * 2**30
    power_mw: int = 312_500
    sm_clock_mhz: int = 1980
    temp_c: int = 54
    pcie_rx_kib_s: int = 2_000
    pcie_tx_kib_s: int = 500
    # Cumulative PCIe byte counters grow at these rates (None: field not offered).
    pcie_rx_counter_bps: float | None = None
    pcie_tx_counter_bps: float | None = None
    # Driver-buffered utilization samples: (wall-clock microseconds, percent).
    util_samples: list[tuple[int, int]] = field(default_factory=list)
    # pynvml function names that raise NVMLError_NotSupported on this GPU.
    unsupported: set[str] = field(default_factory=set)
    # Set to an NVML error code (e.g. NVML_ERROR_GPU_IS_LOST) to make every call fail.
    lost_with: int | None = None
    calls: list[str] = field(default_factory=list)


def make_fake_pynvml(gpus: list[FakeGpu], *, driver: str = "580.82.07",
                     init_error: int | None = None) -> types.ModuleType:
    """A module that quacks like pynvml, backed by ``gpus``.

    ``init_error``: an NVML error code nvmlInit raises (e.g.
    NVML_ERROR_LIBRARY_NOT_FOUND for a machine without the driver).
    """
    fake = types.ModuleType("pynvml")
    for name in dir(real_pynvml):
        if name.startswith(("NVML_", "NVMLError")):
            setattr(fake, name, getattr(real_pynvml, name))
    NVMLError = real_pynvml.NVMLError
    fake.shutdowns = 0

    def gpu_call(handle: SimpleNamespace, func: str) -> FakeGpu:
        gpu = gpus[handle.index]
        gpu.calls.append(func)
        if gpu.lost_with is not None:
            raise NVMLError(gpu.lost_with)
        if func in gpu.unsupported:
            raise NVMLError(real_pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlInit():
        if init_error is not None:
            raise NVMLError(init_error)

    def nvmlShutdown():
        fake.shutdowns += 1

    def nvmlDeviceGetCount():
        return len(gpus)

    def nvmlDeviceGetHandleByIndex(index):
        if not 0 <= index < len(gpus):
            raise NVMLError(real_pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return SimpleNamespace(index=index)

    def nvmlSystemGetDriverVersion():
        return driver

    def nvmlDeviceGetName(handle):
        return gpu_call(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(handle):
        return gpu_call(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetMemoryInfo(handle, version=None):
        gpu = gpu_call(handle, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=gpu.mem_total, used=gpu.mem_used, free=gpu.mem_total - gpu.mem_used)

    def nvmlDeviceGetUtilizationRates(handle):
        gpu = gpu_call(handle, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=gpu.util_gpu, memory=gpu.util_memory)

    def nvmlDeviceGetPowerUsage(handle):
        return gpu_call(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetClockInfo(handle, clock_type):
        gpu = gpu_call(handle, "nvmlDeviceGetClockInfo")
        assert clock_type == real_pynvml.NVML_CLOCK_SM
        return gpu.sm_clock_mhz

    def nvmlDeviceGetTemperature(handle, sensor):
        gpu = gpu_call(handle, "nvmlDeviceGetTemperature")
        assert sensor == real_pynvml.NVML_TEMPERATURE_GPU
        return gpu.temp_c

    def nvmlDeviceGetPcieThroughput(handle, counter):
        gpu = gpu_call(handle, "nvmlDeviceGetPcieThroughput")
        return gpu.pcie_rx_kib_s if counter == real_pynvml.NVML_PCIE_UTIL_RX_BYTES else gpu.pcie_tx_kib_s

    def nvmlDeviceGetFieldValues(handle, field_ids):
        gpu = gpu_call(handle, "nvmlDeviceGetFieldValues")
        now_us = int(time.time() * 1e6)
        rates = {real_pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES: gpu.pcie_rx_counter_bps,
                 real_pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES: gpu.pcie_tx_counter_bps}
        values = []
        for field_id in field_ids:
            rate = rates.get(field_id)
            ok = rate is not None
            values.append(SimpleNamespace(
                fieldId=field_id, timestamp=now_us, valueType=real_pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
                nvmlReturn=real_pynvml.NVML_SUCCESS if ok else real_pynvml.NVML_ERROR_NOT_SUPPORTED,
                value=SimpleNamespace(ullVal=int(rate * now_us / 1e6) if ok else 0)))
        return values

    def nvmlDeviceGetSamples(handle, sampling_type, last_seen_us):
        gpu = gpu_call(handle, "nvmlDeviceGetSamples")
        assert sampling_type == real_pynvml.NVML_GPU_UTILIZATION_SAMPLES
        newer = [SimpleNamespace(timeStamp=ts, sampleValue=SimpleNamespace(uiVal=value))
                 for ts, value in gpu.util_samples if ts > last_seen_us]
        if not newer:  # what the driver answers when nothing is newer than last_seen
            raise NVMLError(real_pynvml.NVML_ERROR_NOT_FOUND)
        return real_pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, newer

    for fn in (nvmlInit, nvmlShutdown, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex,
               nvmlSystemGetDriverVersion, nvmlDeviceGetName, nvmlDeviceGetUUID, nvmlDeviceGetMemoryInfo,
               nvmlDeviceGetUtilizationRates, nvmlDeviceGetPowerUsage, nvmlDeviceGetClockInfo,
               nvmlDeviceGetTemperature, nvmlDeviceGetPcieThroughput, nvmlDeviceGetFieldValues,
               nvmlDeviceGetSamples):
        setattr(fake, fn.__name__, fn)
    return fake
