"""A run's efficiency section: each device's counted FLOPs over its measured time, against its peaks.

The ranks count a step's FLOPs by device (engine/measure/flops.py) and report their
devices' peaks as they start (engine/measure/peak.py); the measured steps give the time.
What MFU and the FLOP rates mean is engine.results.DeviceEfficiency's; energy joins in
the session, which has the telemetry (engine.telemetry.summary).
"""
from __future__ import annotations

import dataclasses

from engine.record.totals import RunTotals
from engine.results import from_json
from engine.results.efficiency import DeviceEfficiency, DevicePeaks, Efficiency
from engine.telemetry.summary import TelemetrySummary


def efficiency(totals: RunTotals, peaks: dict[str, dict], peak_used: str) -> Efficiency | None:
    """None before a counted step and a measured one (a run stopped in its warm-up)."""
    if totals.flops is None or not totals.measured or totals.total_time <= 0:
        return None
    n = totals.measured
    devices = [device_efficiency(d, totals.flops.get(d, 0.0), peaks, peak_used, totals.total_time / n,
                                 totals.busy_time[d] / n) for d in totals.devices]
    notes = []
    if peak_used == "datasheet":
        without = [d.device for d in devices if d.datasheet_peak is None]
        if without:
            notes.append(f"{', '.join(without)}: no datasheet figure (a CPU device, or a GPU the table in "
                         "engine/measure/peak.py does not know): MFU against the measured peak there")
    return Efficiency(devices, totals.samples / n, notes)


def device_efficiency(device: str, flops: float, peaks: dict[str, dict], peak_used: str, step_s: float = 0.0,
                      busy_s: float = 0.0) -> DeviceEfficiency:
    """One device's, from its counted FLOPs and the peaks its rank reported (as JSON: the ``started`` event
    and the ranks' ``ready`` carry them); the app's live view makes one per device to read each step's MFU."""
    reported = from_json(DevicePeaks, peaks.get(device)) or DevicePeaks()
    return DeviceEfficiency(device, flops, step_s, busy_s, measured_peak=reported.measured,
                            datasheet_peak=reported.datasheet, peak_used=peak_used)


def with_energy(efficiency: Efficiency, devices: list[str], telemetry: TelemetrySummary | None) -> Efficiency:
    """Each device's energy per step from its mean power over the measured steps (the telemetry's, which the
    session has), and a note, once, for the devices without an energy counter."""
    power = dict(zip(devices, telemetry.power_w, strict=False)) if telemetry and telemetry.power_w else {}
    measured = [dataclasses.replace(d, energy_j_per_step=power[d.device] * d.step_s)
                if power.get(d.device) is not None else d for d in efficiency.devices]
    without = [d.device for d in measured if d.energy_j_per_step is None]
    cores = [d for d in without if d.rpartition("/")[2].startswith("cpu")]
    gpus = [d for d in without if d not in cores]
    notes = list(efficiency.notes)
    if cores:
        notes.append(f"energy: not measured on {', '.join(cores)} (a CPU core has no energy counter of its own: "
                     "RAPL's counts a whole package, so it is not read)")
    if gpus:
        why = "no telemetry sampled" if telemetry is None else \
            "NVML's total-energy counter not offered, or fewer than two readings over the measured steps"
        notes.append(f"energy: not measured on {', '.join(gpus)} ({why})")
    return dataclasses.replace(efficiency, devices=measured, notes=notes)
