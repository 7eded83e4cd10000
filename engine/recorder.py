"""What a run leaves in the store, and its summary's telemetry figures, in memory that does not grow with it.

Used by ``RunSession``, batch by batch: every step's summary row; its intervals
while ``TimelineKeeper`` keeps them; telemetry samples at full rate for the
last ``RECENT_S`` seconds and thinned into one-second, then ten-second
aggregates for older ones (``THINNING``), checked every ``THIN_EVERY_S``; and
the ``telemetry`` section from running totals (``TelemetryTotals``).
"""
from __future__ import annotations

from engine.store import Store
from engine.telemetry.summary import TelemetryTotals, disagreements
from engine.timeline_keeper import TimelineKeeper

THINNING = ((600.0, 1.0), (7200.0, 10.0))  # samples older than this many seconds: one row per bucket of seconds
THIN_EVERY_S = 60.0


class RunRecorder:
    def __init__(self, store: Store, run_id: str, origin: float, *, timeline: str, warmup: int,
                 device_names: list[str], telemetry_hz: float):
        self.store, self.run_id, self.origin = store, run_id, origin
        self.keeper = TimelineKeeper(timeline)
        self.telemetry = TelemetryTotals(device_names, warmup, telemetry_hz)
        self.steps = 0
        self.last_t = 0.0           # the newest step's end, seconds since the run started
        self._thinned_at = 0.0

    def record(self, steps: list[dict], samples: list) -> None:
        """A batch of step events and telemetry samples (``t`` on the perf_counter clock), stored at once."""
        kept = {ev["step"] for ev in steps if self.keeper.keep(ev)}
        rows = []
        for sample in samples:
            row = sample.to_dict()
            row["t"] = sample.t - self.origin
            rows.append(row)
        self.store.add_steps(self.run_id, steps, keep_timeline=kept.__contains__)
        self.store.add_samples(self.run_id, rows)
        self.telemetry.add_samples(samples)
        for ev in steps:
            self.telemetry.add_step(ev["step"], self.origin + ev["t"] - ev["time_s"], self.origin + ev["t"])
            self.last_t = ev["t"]
        self.steps += len(steps)
        if rows and rows[-1]["t"] - self._thinned_at >= THIN_EVERY_S:
            self._thinned_at = rows[-1]["t"]
            for age, bucket in THINNING:
                self.store.thin_samples(self.run_id, rows[-1]["t"] - age, bucket)

    def finish(self) -> None:
        """The run ended: the last steps' intervals go to the store too."""
        self.store.add_timeline(self.run_id, self.keeper.take_recent())

    def telemetry_summary(self, devices_busy: list[float] | None, devices: list[str]) -> dict:
        self.telemetry.finish()
        telemetry = self.telemetry.summary()
        if devices_busy:
            lines = disagreements(telemetry["util_mean"], devices_busy, devices)
            telemetry["disagreement"] = "; ".join(lines) if lines else None
        return telemetry
