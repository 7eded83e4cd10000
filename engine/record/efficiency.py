"""A run's efficiency section: each device's counted FLOPs over its measured time, against its peaks.

The ranks count a step's FLOPs by device (engine/measure/flops.py) and report their
devices' peaks as they start (engine/measure/peak.py); the measured steps give the time.
What MFU and the FLOP rates mean is engine.results.DeviceEfficiency's; energy joins in
the session, which has the telemetry (engine.telemetry.summary).
"""
from __future__ import annotations

from engine.record.totals import RunTotals
from engine.results import DeviceEfficiency, Efficiency, Peak, from_json


def efficiency(totals: RunTotals, peaks: dict[str, dict], peak_used: str) -> Efficiency | None:
    """None before a counted step and a measured one (a run stopped in its warm-up)."""
    if totals.flops is None or not totals.measured or totals.total_time <= 0:
        return None
    n = totals.measured
    devices = [DeviceEfficiency(d, totals.flops.get(d, 0.0), totals.total_time / n, totals.busy_time[d] / n,
                                measured_peak=from_json(Peak, peaks.get(d, {}).get("measured")),
                                datasheet_peak=from_json(Peak, peaks.get(d, {}).get("datasheet")),
                                peak_used=peak_used)
               for d in totals.devices]
    notes = []
    if peak_used == "datasheet":
        without = [d.device for d in devices if d.datasheet_peak is None]
        if without:
            notes.append(f"{', '.join(without)}: no datasheet figure (a CPU device, or a GPU the table in "
                         "engine/measure/peak.py does not know): MFU against the measured peak there")
    return Efficiency(devices, totals.samples / n, notes)
