"""Reading one GPU's fields through the NVML wrapper, in DeviceSample's units.

Each getter returns the value or ``None`` ("not available") and never raises;
its docstring names the nvidia-smi column it matches. ``probe(index)`` asks
every field once per process, so the sampler only polls what the GPU offers;
``gpu_counter_notes(index)`` says why a GPU gives no GPM metrics, once per process.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace
from typing import Any

from engine.telemetry import nvml

# pynvml constants (nvml.h), copied so this module loads without pynvml.
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197
NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRICS_GET_VERSION = 1

GPM_FIELDS = {
    "sm_active": NVML_GPM_METRIC_SM_UTIL,
    "sm_occupancy": NVML_GPM_METRIC_SM_OCCUPANCY,
    "tensor_active": NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    "dram_bw_util": NVML_GPM_METRIC_DRAM_BW_UTIL,
}
"""DeviceSample's GPM fields and the NVML GPM metric each one is (NVML gives them in percent)."""

# Why NVML refused GPM, by the error it answered; the note names the code so a user can look it up.
_GPM_REFUSALS = {
    nvml.NVML_ERROR_NOT_SUPPORTED: "NVML refused GPM sampling (NVML_ERROR_NOT_SUPPORTED: "
                                   "a GPU in MIG mode, or a GPU or virtual machine that does not offer it)",
    nvml.NVML_ERROR_NO_PERMISSION: "NVML refused GPM sampling (NVML_ERROR_NO_PERMISSION: "
                                   "this user may not read the GPU's performance counters)",
    nvml.NVML_ERROR_FUNCTION_NOT_FOUND: "this NVIDIA driver or nvidia-ml-py has no GPM functions "
                                        "(NVML_ERROR_FUNCTION_NOT_FOUND: an older driver or binding)",
}
GPM_UNSUPPORTED_DEVICE = ("this GPU does not support GPM (NVML: isSupportedDevice 0; "
                          "GPM needs a Hopper or newer GPU, Ampere and older have none)")

KIB = 1024  # NVML's PCIe "KB/s" are KiB/s (nvitop multiplies by 1024 as well)

# nvmlValue_t is a C union; nvmlValueType_t says which member holds the number.
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def utilization(index: int) -> tuple[float | None, float | None]:
    """(GPU, memory) utilization in percent over the driver's last sample period.

    nvidia-smi: ``--query-gpu=utilization.gpu,utilization.memory``.
    """
    rates = nvml.device_query(index, "nvmlDeviceGetUtilizationRates")
    if rates is None:
        return None, None
    return float(rates.gpu), float(rates.memory)


def memory(index: int) -> tuple[int | None, int | None]:
    """(used, total) device memory in bytes.

    nvidia-smi: ``--query-gpu=memory.used,memory.total`` (reported there in MiB).
    """
    info = nvml.device_query(index, "nvmlDeviceGetMemoryInfo")
    if info is None:
        return None, None
    return int(info.used), int(info.total)


def power_w(index: int) -> float | None:
    """Board power draw in watts (NVML answers milliwatts).

    nvidia-smi: ``--query-gpu=power.draw``.
    """
    milliwatts = nvml.device_query(index, "nvmlDeviceGetPowerUsage")
    return None if milliwatts is None else milliwatts / 1000.0


def sm_clock_mhz(index: int) -> float | None:
    """Current SM clock in MHz.

    nvidia-smi: ``--query-gpu=clocks.sm``.
    """
    mhz = nvml.device_query(index, "nvmlDeviceGetClockInfo", NVML_CLOCK_SM)
    return None if mhz is None else float(mhz)


def temperature_c(index: int) -> float | None:
    """GPU core temperature in degrees Celsius.

    nvidia-smi: ``--query-gpu=temperature.gpu``.
    """
    celsius = nvml.device_query(index, "nvmlDeviceGetTemperature", NVML_TEMPERATURE_GPU)
    return None if celsius is None else float(celsius)


def pcie_throughput_bps(index: int) -> tuple[float | None, float | None]:
    """(rx, tx) PCIe bytes per second, each measured by the driver over 20 ms.

    Slow: each of the two NVML calls counts bytes for 20 ms before answering,
    so the GPU reader calls this at a bounded rate. nvidia-smi: ``dmon -s t``
    (``rxpci``, ``txpci``, in MB/s there).
    """
    rx = nvml.device_query(index, "nvmlDeviceGetPcieThroughput", NVML_PCIE_UTIL_RX_BYTES)
    tx = nvml.device_query(index, "nvmlDeviceGetPcieThroughput", NVML_PCIE_UTIL_TX_BYTES)
    return (None if rx is None else rx * float(KIB)), (None if tx is None else tx * float(KIB))


def pcie_byte_counters(index: int) -> tuple[int | None, int | None, int | None]:
    """(rx bytes, tx bytes, wall-clock microseconds): cumulative PCIe counters.

    Newer GPUs and drivers keep running totals; two readings give a rate without
    the 20 ms wait of ``pcie_throughput_bps``. No nvidia-smi column; DCGM's
    ``DCGM_FI_PROF_PCIE_RX_BYTES`` is the closest.
    """
    values = nvml.device_query(index, "nvmlDeviceGetFieldValues",
                               [NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES])
    if values is None or len(values) != 2 or any(v.nvmlReturn != 0 for v in values):
        return None, None, None
    rx, tx = (int(_union_value(v.value, v.valueType)) for v in values)
    return rx, tx, int(values[0].timestamp)


def utilization_samples(index: int, since_us: int) -> tuple[list[tuple[int, float]], int | None]:
    """Driver-buffered GPU utilization samples newer than ``since_us``.

    Returns ([(wall-clock microseconds, percent), ...], NVML error or None); the
    driver keeps a ring of recent samples at its own period (1/6 s to 1 s by
    product), finer than most poll intervals. NOT_FOUND just means "none newer".
    nvidia-smi: none (``utilization.gpu`` shows the latest of them).
    """
    result, error = nvml.device_call(index, "nvmlDeviceGetSamples", NVML_GPU_UTILIZATION_SAMPLES, since_us)
    if error is not None:
        return [], error
    value_type, samples = result
    return [(int(s.timeStamp), float(_union_value(s.sampleValue, value_type))) for s in samples], None


def total_energy_mj(index: int) -> int | None:
    """Millijoules the GPU used since the driver was loaded (Volta and newer): an unsigned 64-bit counter.

    nvidia-smi: none (``power.draw`` is its rate); DCGM's ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``.
    """
    millijoules = nvml.device_query(index, "nvmlDeviceGetTotalEnergyConsumption")
    return None if millijoules is None else int(millijoules)


def gpm_sample_into(index: int, buffer: Any) -> int | None:
    """Read GPU ``index``'s GPM counters now into ``buffer`` (from ``gpm_buffer``): None, or the NVML error.

    nvidia-smi: none; ``dcgmi dmon -e 1002,1003,1004,1005`` reads the same counters.
    """
    return nvml.device_call(index, "nvmlGpmSampleGet", buffer)[1]


def gpm_buffer() -> tuple[Any, int | None]:
    """A GPM sample buffer NVML allocates: (buffer, None) or (None, error). Give it back with ``gpm_free``."""
    return nvml.call("nvmlGpmSampleAlloc")


def gpm_free(buffer: Any) -> None:
    nvml.call("nvmlGpmSampleFree", buffer)


def gpm_metrics(older: Any, newer: Any) -> tuple[dict[str, float | None], int | None]:
    """Each ``GPM_FIELDS`` field in percent over the interval between two GPM samples of one GPU.

    Returns (fields, None), a field None where NVML could not compute its
    metric, or ({}, NVML error) when the call itself failed.
    """
    request, error = nvml.structure("c_nvmlGpmMetricsGet_t")
    if error is not None:
        return {}, error
    request.version = NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(GPM_FIELDS)
    request.sample1, request.sample2 = older, newer
    for slot, metric_id in zip(request.metrics, GPM_FIELDS.values(), strict=False):
        slot.metricId = metric_id
    answer, error = nvml.call("nvmlGpmMetricsGet", request)
    if error is not None:
        return {}, error
    by_id = {m.metricId: _percent(m) for m in answer.metrics[:len(GPM_FIELDS)]}
    return {name: by_id.get(metric_id) for name, metric_id in GPM_FIELDS.items()}, None


def _percent(metric: Any) -> float | None:
    # A metric NVML could not compute has its own nvmlReturn; the interval's others still count.
    if metric.nvmlReturn != 0 or not math.isfinite(metric.value):
        return None
    return float(metric.value)


def _union_value(value: Any, value_type: int) -> Any:
    return getattr(value, _VALUE_MEMBER.get(value_type, "ullVal"))


@dataclass(frozen=True)
class FieldSupport:
    """What one GPU offers, found by asking each NVML getter once."""
    utilization: bool = False
    memory: bool = False
    power: bool = False
    sm_clock: bool = False
    temperature: bool = False
    pcie_counters: bool = False
    pcie_throughput: bool = False  # the 20 ms fallback; only probed without counters
    utilization_samples: bool = False
    energy: bool = False
    gpm: bool = False
    notes: tuple[str, ...] = ()
    """Why a field the GPU might have is not read, where that is worth saying (GPM's refusals)."""

    def sample_fields(self) -> dict[str, bool]:
        """Support per DeviceSample field, plus ``util_samples`` (finer util curve)."""
        pcie = self.pcie_counters or self.pcie_throughput
        return {
            "util": self.utilization, "mem_util": self.utilization,
            "mem_used": self.memory, "mem_total": self.memory,
            "power_w": self.power, "sm_clock_mhz": self.sm_clock, "temp_c": self.temperature,
            "pcie_rx_bps": pcie, "pcie_tx_bps": pcie,
            "util_samples": self.utilization_samples,
            "energy_j": self.energy,
            **dict.fromkeys(GPM_FIELDS, self.gpm),
        }


_probes: dict[int, FieldSupport] = {}
_probe_lock = threading.Lock()


def _offered(error: int | None) -> bool:
    # Only "never" errors count as unsupported; a transient error (a timeout,
    # "not found" for an empty sample ring) leaves the field in the poll.
    if error is None:
        return True
    never = error in nvml.UNSUPPORTED_ERRORS or error in nvml.LOST_ERRORS or error == nvml.NO_LIBRARY
    return not never


def _probe_uncached(index: int) -> FieldSupport:
    def offered(func: str, *args: Any) -> bool:
        return _offered(nvml.device_call(index, func, *args)[1])

    # Counters first: when a GPU has them, the slow 20 ms throughput call is
    # never made, not even to probe it.
    counters = pcie_byte_counters(index)[0] is not None
    gpm_offered, gpm_note = _probe_gpm(index)
    return FieldSupport(
        utilization=offered("nvmlDeviceGetUtilizationRates"),
        memory=offered("nvmlDeviceGetMemoryInfo"),
        power=offered("nvmlDeviceGetPowerUsage"),
        sm_clock=offered("nvmlDeviceGetClockInfo", NVML_CLOCK_SM),
        temperature=offered("nvmlDeviceGetTemperature", NVML_TEMPERATURE_GPU),
        pcie_counters=counters,
        pcie_throughput=not counters and offered("nvmlDeviceGetPcieThroughput", NVML_PCIE_UTIL_RX_BYTES),
        utilization_samples=offered("nvmlDeviceGetSamples", NVML_GPU_UTILIZATION_SAMPLES, 0),
        energy=offered("nvmlDeviceGetTotalEnergyConsumption"),
        gpm=gpm_offered,
        notes=(gpm_note,) if gpm_note else (),
    )


def _probe_gpm(index: int) -> tuple[bool, str | None]:
    """(whether GPU ``index`` gives GPM samples, the note saying why not where that is worth saying)."""
    support, error = nvml.device_call(index, "nvmlGpmQueryDeviceSupport")
    if error is None and not support.isSupportedDevice:
        return False, _gpm_note(index, GPM_UNSUPPORTED_DEVICE)
    if error is None:
        # A GPU with GPM may still refuse to be sampled (MIG mode, permissions): one trial sample says.
        buffer, error = gpm_buffer()
        if buffer is not None:
            error = gpm_sample_into(index, buffer)
            gpm_free(buffer)
    if _offered(error):
        return True, None
    refusal = _GPM_REFUSALS.get(error)  # none for a lost GPU or no NVML: those are said elsewhere
    return False, (_gpm_note(index, refusal) if refusal else None)


def _gpm_note(index: int, reason: str) -> str:
    return f"GPU {index}: no GPM metrics ({', '.join(GPM_FIELDS)}): {reason}"


def probe(index: int) -> FieldSupport:
    """Which fields GPU ``index`` offers; asked once per process, then cached."""
    with _probe_lock:
        support = _probes.get(index)
        if support is None:
            support = _probes[index] = _probe_uncached(index)
        return support


def gpm_refused(index: int, error: int) -> None:
    """GPM answered ``error`` while sampling GPU ``index`` (after its probe had offered it): stop asking in
    this process, and note why once when the error says GPM is refused (a transient one is not)."""
    if _offered(error):
        return
    refusal = _GPM_REFUSALS.get(error)
    probed = probe(index)
    with _probe_lock:
        support = _probes.get(index, probed)
        notes = support.notes
        if refusal and _gpm_note(index, refusal) not in notes:
            notes += (_gpm_note(index, refusal),)
        _probes[index] = replace(support, gpm=False, notes=notes)


def gpu_counter_notes(index: int) -> list[str]:
    """Why GPU ``index`` gives no GPM metrics (its DeviceSample fields sm_active, sm_occupancy, tensor_active
    and dram_bw_util are None), one line per reason, each said once per process: an Ampere or older GPU,
    NVML's refusal (NOT_SUPPORTED in MIG mode, NO_PERMISSION) or a driver or nvidia-ml-py without GPM.
    Empty when it gives them. ``gpu_inventory.inventory()`` lists the same notes per GPU."""
    return list(probe(index).notes)


def forget_probes() -> None:
    with _probe_lock:
        _probes.clear()
