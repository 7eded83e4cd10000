"""A run's efficiency section, typed: FLOPs, MFU and energy per device (docs/summary.md ``efficiency``).

Its own module, as the telemetry section is (engine.results imports both): the rank's peaks
(engine/measure/peak.py), the run's summary (engine/record/efficiency.py) and the app's live
plot (app/state/live_data.py) read these, and each figure is defined once here.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Peak:
    """A device's peak FLOP/s in the run's compute dtype, and where the figure comes from
    (engine/measure/peak.py: "measured: ..." or "datasheet: ...")."""
    flops_per_s: float
    source: str


@dataclass(frozen=True)
class DevicePeaks:
    """A device's peaks as its rank reports them when ready (engine/run/rank.py device_peaks): the measured one,
    and a known GPU's datasheet figure."""
    measured: Peak | None = None
    datasheet: Peak | None = None


@dataclass(frozen=True)
class DeviceEfficiency:
    """How much of one device a run used: the FLOPs of its work in a step (torch's FLOP formulas, counted on
    the second step: engine/measure/flops.py) over the measured steps' mean time, over its busy time, and
    against its peak (docs/summary.md)."""
    device: str
    flops_per_step: float
    step_s: float                        # the measured steps' mean time
    busy_s: float                        # the device's mean busy seconds in those steps
    measured_peak: Peak | None = None
    datasheet_peak: Peak | None = None   # a known GPU's
    peak_used: str = "measured"          # which MFU is against (--peak); the other where this one is missing
    energy_j_per_step: float | None = None   # the device's energy counter over the measured steps, per step

    @property
    def peak(self) -> Peak | None:
        chosen = self.datasheet_peak if self.peak_used == "datasheet" else self.measured_peak
        return chosen or self.measured_peak or self.datasheet_peak

    @property
    def achieved_flops_per_s(self) -> float | None:
        """FLOP/s over the whole step: what MFU divides by the peak."""
        return self.flops_per_step / self.step_s if self.step_s > 0 else None

    @property
    def busy_flops_per_s(self) -> float | None:
        """FLOP/s while the device was busy: how fast its work ran, apart from its idle time."""
        return self.flops_per_step / self.busy_s if self.busy_s > 0 else None

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilization: achieved FLOP/s over the peak (``mfu``), over the measured steps; None where
        it would be over 1, which cannot be (``over_peak`` has it, and a finding says why)."""
        return possible(mfu(self.flops_per_step, self.step_s, self.peak))

    @property
    def over_peak(self) -> float | None:
        """The MFU the count and the peak give where it is over 1: the count or the peak is wrong."""
        found = mfu(self.flops_per_step, self.step_s, self.peak)
        return found if found is not None and found > 1 else None

    def step_mfu(self, step_s: float | None) -> float | None:
        """One step's MFU, from its own time (None where over 1)."""
        return possible(mfu(self.flops_per_step, step_s, self.peak))

    def text(self) -> str:
        """"cpu:0 24.8 GFLOP a step, 85.1 GFLOP/s (busy: 85.3), MFU 88.0% of 96.7 GFLOP/s (measured ...)"."""
        parts = [f"{self.device} {si(self.flops_per_step, 'FLOP')} a step"]
        if self.achieved_flops_per_s is not None:
            busy = f" (busy: {si(self.busy_flops_per_s, 'FLOP/s')})" if self.busy_flops_per_s is not None else ""
            parts.append(f"{si(self.achieved_flops_per_s, 'FLOP/s')}{busy}")
        peak = self.peak
        if self.mfu is not None:
            parts.append(f"MFU {self.mfu:.1%} of {si(peak.flops_per_s, 'FLOP/s')} ({peak.source})")
        other = self.datasheet_peak if peak is self.measured_peak else self.measured_peak
        if other is not None and other is not peak:
            parts.append(f"beside {si(other.flops_per_s, 'FLOP/s')} ({other.source})")
        if self.energy_j_per_step is not None:
            parts.append(f"{self.energy_j_per_step:.3g} J a step")
        return ", ".join(parts)


@dataclass(frozen=True)
class Efficiency:
    """A run's devices' efficiency, and the run's as a whole."""
    devices: list[DeviceEfficiency] = field(default_factory=list)
    samples_per_step: float | None = None
    notes: list[str] = field(default_factory=list)   # what could not be measured, and why (once each)

    @property
    def mfu(self) -> float | None:
        """The run's MFU: every device's FLOPs over the step time and the sum of their peaks."""
        peaks = [d.peak for d in self.devices]
        if not self.devices or any(p is None for p in peaks):
            return None
        step = self.devices[0].step_s
        total = sum(p.flops_per_s for p in peaks)
        return possible(sum(d.flops_per_step for d in self.devices) / (step * total)) if step > 0 and total > 0 \
            else None

    @property
    def energy_j_per_step(self) -> float | None:
        """Every device's energy per step together; None unless each has one."""
        energies = [d.energy_j_per_step for d in self.devices]
        return sum(energies) if energies and all(e is not None for e in energies) else None

    @property
    def samples_per_joule(self) -> float | None:
        energy = self.energy_j_per_step
        return self.samples_per_step / energy if energy and self.samples_per_step else None

    def device(self, name: str) -> DeviceEfficiency | None:
        return next((d for d in self.devices if d.device == name), None)

    def lines(self) -> list[str]:
        """How the CLI and the report say it: a line per device, then the run's MFU and energy."""
        out = [d.text() for d in self.devices]
        whole = [f"run MFU {self.mfu:.1%}" if self.mfu is not None else None,
                 f"{self.energy_j_per_step:.3g} J a step, {self.samples_per_joule:.3g} samples/J"
                 if self.samples_per_joule is not None else None]
        if any(whole):
            out.append(", ".join(w for w in whole if w))
        return out + list(self.notes)


def mfu(flops: float, seconds: float | None, peak: Peak | None) -> float | None:
    """Model FLOPs utilization: ``flops`` done in ``seconds``, over the peak FLOP/s (torchtitan's and the PaLM
    paper's measure, per device); None without a time or a peak."""
    if not seconds or seconds <= 0 or peak is None or peak.flops_per_s <= 0:
        return None
    return flops / seconds / peak.flops_per_s


def possible(utilization: float | None) -> float | None:
    """A utilization as a figure, or None where it is over 1 (100 %): more than the peak is not a measurement but
    a count or a peak that is wrong (engine/record/findings.py says which)."""
    return utilization if utilization is not None and utilization <= 1 else None


def si(value: float, unit: str) -> str:
    """"24.8 GFLOP", "96.7 TFLOP/s": three digits and the SI prefix that keeps them."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
