"""Reading one GPU's fields through the NVML wrapper, in DeviceSample's units.

Each getter returns the value or ``None`` ("not available") and never raises;
its docstring names the nvidia-smi column it matches. ``probe(index)`` asks
every field once per process, so the sampler only polls what the GPU offers.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
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

    def sample_fields(self) -> dict[str, bool]:
        """Support per DeviceSample field, plus ``util_samples`` (finer util curve)."""
        pcie = self.pcie_counters or self.pcie_throughput
        return {
            "util": self.utilization, "mem_util": self.utilization,
            "mem_used": self.memory, "mem_total": self.memory,
            "power_w": self.power, "sm_clock_mhz": self.sm_clock, "temp_c": self.temperature,
            "pcie_rx_bps": pcie, "pcie_tx_bps": pcie,
            "util_samples": self.utilization_samples,
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
    return FieldSupport(
        utilization=offered("nvmlDeviceGetUtilizationRates"),
        memory=offered("nvmlDeviceGetMemoryInfo"),
        power=offered("nvmlDeviceGetPowerUsage"),
        sm_clock=offered("nvmlDeviceGetClockInfo", NVML_CLOCK_SM),
        temperature=offered("nvmlDeviceGetTemperature", NVML_TEMPERATURE_GPU),
        pcie_counters=counters,
        pcie_throughput=not counters and offered("nvmlDeviceGetPcieThroughput", NVML_PCIE_UTIL_RX_BYTES),
        utilization_samples=offered("nvmlDeviceGetSamples", NVML_GPU_UTILIZATION_SAMPLES, 0),
    )


def probe(index: int) -> FieldSupport:
    """Which fields GPU ``index`` offers; asked once per process, then cached."""
    with _probe_lock:
        support = _probes.get(index)
        if support is None:
            support = _probes[index] = _probe_uncached(index)
        return support


def forget_probes() -> None:
    with _probe_lock:
        _probes.clear()
