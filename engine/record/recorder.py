"""What a run leaves in the store, and its summary's telemetry figures, in memory that does not grow with it.

Used by ``RunSession``, batch by batch: every step's summary row; its intervals
when ``TimelineKeeper`` keeps them for good, and the last steps' intervals
rewritten every ``RECENT_FLUSH_S`` (so a recording process that dies keeps
them too); telemetry samples at full rate for the last ten minutes, thinned
into one-second, then ten-second aggregates for older ones (``THINNING``),
checked every ``THIN_EVERY_S``; and the ``telemetry`` section from running
totals (``TelemetryTotals``).
"""
from __future__ import annotations

import dataclasses

from engine.store import Store

from engine.record.timeline_keeper import TimelineKeeper
from engine.results import TelemetrySummary
from engine.telemetry.summary import TelemetryTotals, disagreements

THINNING = ((600.0, 1.0), (7200.0, 10.0))  # samples older than this many seconds: one row per bucket of seconds
THIN_EVERY_S = 60.0
RECENT_FLUSH_S = 30.0  # run seconds between rewrites of the last steps' intervals


class RunRecorder:
    def __init__(self, store: Store, run_id: str, origin: float, *, timeline: str, warmup: int,
                 device_names: list[str], telemetry_hz: float):
        self.store, self.run_id, self.origin = store, run_id, origin
        self.keeper = TimelineKeeper(timeline)
        self.telemetry = TelemetryTotals(device_names, warmup, telemetry_hz)
        self.steps = 0
        self.timeline_kept = 0      # steps whose intervals are stored for good
        self.last_t = 0.0           # the newest step's end, seconds since the run started
        self._thinned_at = 0.0
        self._recent_flushed_at = 0.0
        self._recent_stored: list[int] = []  # the last steps whose intervals the last flush wrote

    def record(self, steps: list[Step], samples: list) -> None:
        """A batch of steps and telemetry samples (``t`` on the perf_counter clock), stored at once."""
        kept = {step.step for step in steps if self.keeper.keep(step)}
        self.timeline_kept += len(kept)
        rows = []
        for sample in samples:
            row = sample.to_dict()
            row["t"] = sample.t - self.origin
            rows.append(row)
        self.store.add_steps(self.run_id, steps, kept_steps=kept)
        self.store.add_samples(self.run_id, rows)
        self.telemetry.add_samples(samples)
        for step in steps:
            self.telemetry.add_step(step.step, self.origin + step.t - step.time_s, self.origin + step.t)
            self.last_t = step.t
        self.steps += len(steps)
        if self.last_t - self._recent_flushed_at >= RECENT_FLUSH_S:
            self._recent_flushed_at = self.last_t
            self._store_recent(list(self.keeper.recent))
        if rows and rows[-1]["t"] - self._thinned_at >= THIN_EVERY_S:
            self._thinned_at = rows[-1]["t"]
            for age, bucket in THINNING:
                self.store.thin_samples(self.run_id, rows[-1]["t"] - age, bucket)

    def _store_recent(self, steps: list[Step]) -> None:
        self.store.replace_timeline(self.run_id, drop=self._recent_stored, steps=steps)
        self._recent_stored = [step.step for step in steps]

    def finish(self) -> None:
        """The run ended: the last steps' intervals go to the store for good."""
        recent = self.keeper.take_recent()
        self._store_recent(recent)
        self.timeline_kept += len(recent)

    def telemetry_summary(self, devices_busy: list[float] | None, devices: list[str]) -> TelemetrySummary:
        self.telemetry.finish()
        telemetry = self.telemetry.summary()
        lines = disagreements(telemetry.util_mean, devices_busy, devices) if devices_busy else []
        return dataclasses.replace(telemetry, disagreement="; ".join(lines) or None)
