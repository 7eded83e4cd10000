"""A fake ``pynvml`` module: the one stand-in this project allows (no GPU here).

It answers the NVML functions engine.telemetry calls from ``FakeGpu`` objects
whose fields a test sets. Constants, the NVMLError classes and GPM's ctypes
structures are the real nvidia-ml-py ones (that module imports without a
driver), so error handling is tested against the exceptions real NVML raises
and GPM's requests are built as for the real library. Install it with
``monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([...]))`` and
``engine.telemetry.gpu_inventory.reset()``.
"""
from __future__ import annotations

import ctypes
import time
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml as real_pynvml

GPM_FUNCTIONS = ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlGpmMetricsGet",
                 "nvmlGpmSampleFree")
GPM_TYPES = ("c_nvmlGpmMetricsGet_t", "c_nvmlGpmMetric_t", "c_nvmlGpmSupport_t", "c_nvmlGpmSample_t",
             "struct_c_nvmlGpmSample_t")
"""What an nvidia-ml-py from before GPM lacks (pass both as ``binding_lacks``)."""

DEFAULT_GPM_METRICS = {real_pynvml.NVML_GPM_METRIC_SM_UTIL: 72.5, real_pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 38.25,
                       real_pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 55.0,
                       real_pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 61.75}


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
    # The total-energy counter, millijoules since the driver loaded (a test moves it); None: not supported.
    energy_mj: int | None = 5_000_000
    # GPM: whether nvmlGpmQueryDeviceSupport says isSupportedDevice (Hopper and newer: 1), an NVML error code
    # nvmlGpmSampleGet raises all the same (NVML_ERROR_NOT_SUPPORTED in MIG mode, NVML_ERROR_NO_PERMISSION),
    # and each metric's percent over the interval that ends at the next sample (a metric left out: its own
    # nvmlReturn is NOT_SUPPORTED).
    gpm_supported_device: bool = True
    gpm_refused_with: int | None = None
    gpm_metrics: dict[int, float] = field(default_factory=lambda: dict(DEFAULT_GPM_METRICS))
    # pynvml function names that raise NVMLError_NotSupported on this GPU.
    unsupported: set[str] = field(default_factory=set)
    # Set to an NVML error code (e.g. NVML_ERROR_GPU_IS_LOST) to make every call fail.
    lost_with: int | None = None
    calls: list[str] = field(default_factory=list)


def make_fake_pynvml(gpus: list[FakeGpu], *, driver: str = "580.82.07", init_error: int | None = None,
                     driver_lacks: frozenset[str] | set[str] = frozenset(),
                     binding_lacks: frozenset[str] | set[str] = frozenset()) -> types.ModuleType:
    """A module that quacks like pynvml, backed by ``gpus``.

    ``init_error``: an NVML error code nvmlInit raises (e.g.
    NVML_ERROR_LIBRARY_NOT_FOUND for a machine without the driver).
    ``driver_lacks``: functions an older driver's libnvidia-ml.so does not have:
    they raise NVML_ERROR_FUNCTION_NOT_FOUND, as pynvml's do then.
    ``binding_lacks``: names an older nvidia-ml-py does not define at all
    (``GPM_FUNCTIONS + GPM_TYPES`` for one from before GPM).

    ``fake.gpm_buffers`` holds the GPM sample buffers allocated and not yet
    freed (address -> what the last nvmlGpmSampleGet read into it, or None).
    """
    fake = types.ModuleType("pynvml")
    for name in dir(real_pynvml):
        if name.startswith(("NVML_", "NVMLError")) or name in GPM_TYPES:
            setattr(fake, name, getattr(real_pynvml, name))
    NVMLError = real_pynvml.NVMLError
    fake.shutdowns = 0
    fake.gpm_buffers = {}
    allocations: dict[int, ctypes.Array] = {}  # the memory behind each buffer's pointer, kept alive

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

    def nvmlDeviceGetTotalEnergyConsumption(handle):
        gpu = gpu_call(handle, "nvmlDeviceGetTotalEnergyConsumption")
        if gpu.energy_mj is None:  # before Volta
            raise NVMLError(real_pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.energy_mj % 2**64  # c_uint64, as ctypes hands it back

    def nvmlGpmQueryDeviceSupport(device):
        gpu = gpu_call(device, "nvmlGpmQueryDeviceSupport")
        support = real_pynvml.c_nvmlGpmSupport_t()
        support.version = real_pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(gpu.gpm_supported_device)
        return support

    def address_of(gpm_sample) -> int:
        address = ctypes.cast(gpm_sample, ctypes.c_void_p).value
        if address not in fake.gpm_buffers:  # never allocated, or freed: real NVML would crash or worse
            raise NVMLError(real_pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return address

    def nvmlGpmSampleAlloc():
        memory = ctypes.create_string_buffer(16)
        address = ctypes.addressof(memory)
        allocations[address] = memory
        fake.gpm_buffers[address] = None
        return ctypes.cast(memory, real_pynvml.c_nvmlGpmSample_t)

    def nvmlGpmSampleFree(gpm_sample):
        address = address_of(gpm_sample)
        del fake.gpm_buffers[address], allocations[address]

    def nvmlGpmSampleGet(device, gpm_sample):
        gpu = gpu_call(device, "nvmlGpmSampleGet")
        address = address_of(gpm_sample)
        if not gpu.gpm_supported_device:
            raise NVMLError(real_pynvml.NVML_ERROR_NOT_SUPPORTED)
        if gpu.gpm_refused_with is not None:
            raise NVMLError(gpu.gpm_refused_with)
        fake.gpm_buffers[address] = SimpleNamespace(gpu=device.index, taken=time.perf_counter(),
                                                    metrics=dict(gpu.gpm_metrics))
        return gpm_sample

    def nvmlGpmMetricsGet(metrics_get):
        if metrics_get.version != real_pynvml.NVML_GPM_METRICS_GET_VERSION:
            raise NVMLError(real_pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        first, second = (fake.gpm_buffers[address_of(s)] for s in (metrics_get.sample1, metrics_get.sample2))
        if (first is None or second is None or first.gpu != second.gpu or second.taken <= first.taken
                or not 0 < metrics_get.numMetrics <= real_pynvml.NVML_GPM_METRIC_MAX):
            raise NVMLError(real_pynvml.NVML_ERROR_INVALID_ARGUMENT)  # an empty sample, or older one second
        for metric in metrics_get.metrics[:metrics_get.numMetrics]:
            value = second.metrics.get(metric.metricId)
            metric.nvmlReturn = real_pynvml.NVML_SUCCESS if value is not None else real_pynvml.NVML_ERROR_NOT_SUPPORTED
            metric.value = value if value is not None else 0.0
        return metrics_get

    def missing_in_driver(name: str):
        def call(*args):
            raise NVMLError(real_pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        call.__name__ = name
        return call

    for fn in (nvmlInit, nvmlShutdown, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex,
               nvmlSystemGetDriverVersion, nvmlDeviceGetName, nvmlDeviceGetUUID, nvmlDeviceGetMemoryInfo,
               nvmlDeviceGetUtilizationRates, nvmlDeviceGetPowerUsage, nvmlDeviceGetClockInfo,
               nvmlDeviceGetTemperature, nvmlDeviceGetPcieThroughput, nvmlDeviceGetFieldValues,
               nvmlDeviceGetSamples, nvmlDeviceGetTotalEnergyConsumption, nvmlGpmQueryDeviceSupport,
               nvmlGpmSampleAlloc, nvmlGpmSampleFree, nvmlGpmSampleGet, nvmlGpmMetricsGet):
        name = fn.__name__
        setattr(fake, name, missing_in_driver(name) if name in driver_lacks else fn)
    for name in binding_lacks:
        if hasattr(fake, name):
            delattr(fake, name)
    return fake
