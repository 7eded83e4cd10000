"""GpuTarget: one NVIDIA GPU, read through NVML as nvidia-smi would see it.

Each poll gives one full sample (every field the GPU offers). Where the driver
buffers utilization samples, the ones that arrived since the last poll are
added as utilization-only samples at their own timestamps (their other fields
are None), so the utilization curve is finer than the poll interval. Energy
and GPM come from counters read at open and at each poll (gpu_counters.py);
``close()`` gives GPM's sample buffers back to NVML.
"""
from __future__ import annotations

import time

from engine.environment import variable
from engine.telemetry import gpu_fields, nvml
from engine.telemetry.gpu_counters import NO_GPM, EnergyTotal, GpmInterval
from engine.telemetry.gpu_fields import FieldSupport
from engine.telemetry.poll import Poll
from engine.telemetry.sample import DeviceSample

# The PCIe throughput fallback blocks 2 x 20 ms in the driver; asking at most
# twice a second keeps a 50 Hz poll on schedule (polls in between carry None).
PCIE_THROUGHPUT_MIN_INTERVAL_S = 0.5


class GpuTarget:
    """One GPU by its NVML index (``nvidia-smi -i INDEX``); None when NVML has no GPU for it (a MIG instance)."""

    kind = "cuda"

    def __init__(self, name: str, index: int | None):
        self.name = name
        self.index = index
        self._support: FieldSupport | None = None
        self._last_sample_us = 0          # newest driver-buffered sample already taken
        self._last_counters: tuple[int, int, int] | None = None
        self._last_throughput_t = float("-inf")
        self._energy = EnergyTotal()
        self._gpm: GpmInterval | None = None
        self._reported_gone = False

    def __repr__(self) -> str:
        return f"GpuTarget({self.name!r}, index={self.index})"

    def open(self, poll: Poll) -> None:
        """Probe the fields once; start the driver's sample ring and counters from now."""
        if self.index is None or self.index >= nvml.device_count():
            return  # read() reports it, once
        self._support = gpu_fields.probe(self.index)
        # Samples buffered before the sampler started belong to no run.
        self._last_sample_us = int(time.time() * 1e6)
        if self._support.pcie_counters:
            self._last_counters = self._counters()
        if self._support.energy:
            self._energy.add(gpu_fields.total_energy_mj(self.index))
        if self._support.gpm:
            self._gpm = GpmInterval(self.index)
            self._gpm.start(time.perf_counter())

    def close(self) -> None:
        """The sampler is done with this GPU: give back what NVML holds for it."""
        if self._gpm is not None:
            self._gpm.close()

    def read(self, poll: Poll) -> list[DeviceSample]:
        if self._gone(poll):
            return []
        support = self._support or FieldSupport()
        util, mem_util = gpu_fields.utilization(self.index) if support.utilization else (None, None)
        mem_used, mem_total = gpu_fields.memory(self.index) if support.memory else (None, None)
        power = gpu_fields.power_w(self.index) if support.power else None
        clock = gpu_fields.sm_clock_mhz(self.index) if support.sm_clock else None
        temp = gpu_fields.temperature_c(self.index) if support.temperature else None
        rx, tx = self._pcie(support)
        energy = self._energy.add(gpu_fields.total_energy_mj(self.index)) if support.energy else None
        t = time.perf_counter()
        gpm = self._gpm.read(t) if self._gpm is not None else NO_GPM
        extra = self._buffered_utilization(poll) if support.utilization_samples else []
        if self._gone(poll):  # lost during this pass: what was read is not trustworthy
            return []
        full = DeviceSample(t=t, device=self.name, util=util, mem_util=mem_util, mem_used=mem_used,
                            mem_total=mem_total, power_w=power, sm_clock_mhz=clock, temp_c=temp,
                            pcie_rx_bps=rx, pcie_tx_bps=tx, energy_j=energy, **gpm)
        return extra + [full]

    def _gone(self, poll: Poll) -> bool:
        """True when this GPU cannot be read; the first time, say why (once per run)."""
        if self._support is not None and not nvml.is_lost(self.index):
            return False
        if not self._reported_gone:
            self._reported_gone = True
            if self.index is None:
                visible = variable("CUDA_VISIBLE_DEVICES")
                poll.warn(f"{self.name}: NVML has no GPU for it "
                          f"({nvml.start_error() or f'{nvml.device_count()} GPUs seen by NVML'}"
                          + (f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "")
                          + "; MIG instances are not read); no telemetry for it")
            elif nvml.is_lost(self.index):
                why = nvml.lost_devices().get(self.index, "GPU is lost")
                poll.warn(f"{self.name}: NVML lost GPU {self.index} ({why}); no more telemetry from it")
            else:
                poll.warn(f"{self.name}: NVML does not see GPU {self.index} "
                          f"({nvml.start_error() or f'{nvml.device_count()} GPUs visible'}); no telemetry for it")
        return True

    def _pcie(self, support: FieldSupport) -> tuple[float | None, float | None]:
        if support.pcie_counters:
            current = self._counters()
            last, self._last_counters = self._last_counters, current
            if current is None or last is None:
                return None, None
            seconds = (current[2] - last[2]) / 1e6
            rx_bytes, tx_bytes = current[0] - last[0], current[1] - last[1]
            if seconds <= 0 or rx_bytes < 0 or tx_bytes < 0:  # same reading, or a counter wrapped
                return None, None
            return rx_bytes / seconds, tx_bytes / seconds
        if support.pcie_throughput:
            now = time.perf_counter()
            if now - self._last_throughput_t >= PCIE_THROUGHPUT_MIN_INTERVAL_S:
                self._last_throughput_t = now
                return gpu_fields.pcie_throughput_bps(self.index)
        return None, None

    def _counters(self) -> tuple[int, int, int] | None:
        rx, tx, wall_us = gpu_fields.pcie_byte_counters(self.index)
        return None if rx is None else (rx, tx, wall_us)

    def _buffered_utilization(self, poll: Poll) -> list[DeviceSample]:
        samples, _ = gpu_fields.utilization_samples(self.index, self._last_sample_us)
        fresh = sorted(s for s in samples if s[0] > self._last_sample_us)
        if fresh:
            self._last_sample_us = fresh[-1][0]
        return [DeviceSample(t=poll.perf_from_wall_us(wall_us), device=self.name, util=value)
                for wall_us, value in fresh]
