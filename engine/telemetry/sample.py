"""DeviceSample: what one device looked like at one instant.

Immutable, so the sampler thread can hand the same object to the GUI, the
store and the summary without copies or locks. ``None`` means "not available"
(unsupported by the device, a dead process, a lost GPU): it keeps samples
JSON-able, where nvitop's NA object would not be.
"""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class DeviceSample:
    t: float
    """Seconds on the ``time.perf_counter()`` clock (CLOCK_MONOTONIC on Linux,
    shared with the worker and rank processes, so their step times compare)."""
    device: str
    """The device it describes: "cuda:0", "cpu:1", or "core 3" in the idle view."""
    util: float | None = None
    """Percent busy: a GPU's utilization.gpu; for a run's CPU virtual device, the share of the period its
    process's threads pinned to the device's core ran there or were ready to and waited for it (its own
    work, as the engine's timers see it); for the idle view's "core N", the core's busy share."""
    wait_util: float | None = None
    """Percent of the period, within ``util``, that a run's CPU virtual device's threads were ready to run but
    waited for the core (another program or thread held it); None for GPUs and the idle view."""
    core_util: float | None = None
    """Percent busy of a run's CPU virtual device's whole core, whatever ran there (other programs, the
    hypervisor's steal time): what ``util`` would read without knowing the run's threads."""
    mem_util: float | None = None
    """Percent of time device memory was read or written (GPU only)."""
    mem_used: int | None = None
    """Bytes: GPU memory used, or the RSS of the process on a CPU virtual device."""
    mem_total: int | None = None
    """Bytes: GPU memory, or the machine's RAM for a CPU virtual device."""
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    pcie_rx_bps: float | None = None
    """Bytes per second the GPU received over PCIe."""
    pcie_tx_bps: float | None = None
    """Bytes per second the GPU sent over PCIe."""
    # The fields below came after the others: they stay last, so rows of DeviceSample's fields in order from an
    # older agent (engine.nodes) still fill the fields they had.
    energy_j: float | None = None
    """Joules the GPU used since the sampler's first reading of it (NVML's total-energy counter, millijoules
    since the driver loaded, counted from that reading): cumulative, 0.0 at the start; a counter reset adds
    nothing for its interval, a 64-bit wrap what was used across it. GPUs from Volta on; None elsewhere."""
    sm_active: float | None = None
    """Percent of the GPU's SMs that were busy over the interval since the previous GPM sample (NVML GPM
    SM_UTIL, like DCGM's SM_ACTIVE). The GPM fields: Hopper and newer GPUs. None until there is an interval
    (the first GPM sample is taken when the sampler starts on the GPU), on polls less than 90 ms after the
    last GPM sample (the interval goes on to a later poll), and where GPM is missing or refused
    (``gpu_fields.gpu_counter_notes`` says why)."""
    sm_occupancy: float | None = None
    """Percent of the SMs' warp slots holding active warps (of the theoretical maximum), same interval (GPM
    SM_OCCUPANCY)."""
    tensor_active: float | None = None
    """Percent of the interval the SMs ran tensor-core operations of any kind (GPM ANY_TENSOR_UTIL)."""
    dram_bw_util: float | None = None
    """Percent of the device memory's theoretical bandwidth used over the interval (GPM DRAM_BW_UTIL)."""

    def to_dict(self) -> dict:
        """Plain dict in field order, ready for json.dumps or a database row."""
        return {name: getattr(self, name) for name in FIELD_NAMES}


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(DeviceSample))
"""DeviceSample's fields in declaration order (column order for CSV and SQL)."""
