"""What a run leaves in the store, and its summary's telemetry figures, in memory that does not grow with it.

Used by ``RunSession``, batch by batch: every step's summary row; its intervals
when ``TimelineKeeper`` keeps them for good, and the last steps' intervals
rewritten every ``RECENT_FLUSH_S`` (so a recording process that dies keeps
them too); telemetry samples at full rate for the last ten minutes, thinned
into one-second, then ten-second aggregates for older ones (``THINNING``),
checked every ``THIN_EVERY_S``; and the ``telemetry`` section from running
totals (``TelemetryTotals``).

A batch is held until the store acknowledged each of its writes (``Batch``):
the app's store runs in a process of its own, which may end in the middle of a
write (engine/store/client.py), and ``resend`` then sends what was not
acknowledged to the new one. The write that was cut short may have committed,
so it goes again in a form that stores nothing twice; the running totals count
a batch once, after the store has all of it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from engine.record.timeline_keeper import TimelineKeeper
from engine.results import Step, TelemetrySummary
from engine.store import Store
from engine.telemetry.summary import TelemetryTotals, disagreements

THINNING = ((600.0, 1.0), (7200.0, 10.0))  # samples older than this many seconds: one row per bucket of seconds
THIN_EVERY_S = 60.0
RECENT_FLUSH_S = 30.0  # run seconds between rewrites of the last steps' intervals


@dataclass
class Batch:
    """One batch's writes, decided once (the keeper's choices are not made twice), until the store has them all."""
    steps: list[Step]
    samples: list                    # DeviceSample, perf_counter clock: for the totals
    rows: list[dict]                 # the same, as stored: ``t`` since the run started
    kept: set[int]                   # steps whose intervals are stored for good
    last_t: float
    recent: list[Step] | None        # the last steps' intervals to rewrite with this batch, if it is time
    thin: bool                       # samples to thin after this batch
    done: set[str] = field(default_factory=set)   # writes the store acknowledged
    unsure: bool = False             # the first write not done was cut short: it may have committed


class RunRecorder:
    def __init__(self, store: Store, run_id: str, origin: float, *, timeline: str, warmup: int,
                 device_names: list[str], telemetry_hz: float):
        self.store, self.run_id, self.origin = store, run_id, origin
        self.keeper = TimelineKeeper(timeline)
        self.telemetry = TelemetryTotals(device_names, warmup, telemetry_hz)
        self.steps = 0
        self.timeline_kept = 0      # steps whose intervals are stored for good
        self.last_t = 0.0           # the newest step's end, seconds since the run started
        self.batch: Batch | None = None   # the batch the store has not acknowledged whole
        self._thinned_at = 0.0
        self._recent_flushed_at = 0.0
        self._recent_stored: list[int] = []  # the last steps whose intervals the last flush wrote
        self._final: list[Step] | None = None   # the last steps' intervals, taken from the keeper as the run ends
        self._finished = False

    def record(self, steps: list[Step], samples: list) -> None:
        """A batch of steps and telemetry samples (``t`` on the perf_counter clock), stored at once. If this
        raises, the batch is kept: ``resend`` stores the rest of it."""
        self.resend()   # one that was never acknowledged whole goes first
        self.batch = self._prepare(steps, samples)
        self.resend()

    def resend(self) -> None:
        """Send what the store has not acknowledged of the batch in hand (none: nothing to do); on success the
        batch counts in the totals, once."""
        batch = self.batch
        if batch is None:
            return
        for name, write in (("steps", self._write_steps), ("samples", self._write_samples),
                            ("recent", self._write_recent), ("thin", self._write_thin)):
            if name in batch.done:
                continue
            try:
                write(batch)
            except BaseException:
                batch.unsure = True
                raise
            batch.done.add(name)
            batch.unsure = False
        self._count(batch)
        self.batch = None

    def _prepare(self, steps: list[Step], samples: list) -> Batch:
        kept = {step.step for step in steps if self.keeper.keep(step)}
        rows = []
        for sample in samples:
            row = sample.to_dict()
            row["t"] = sample.t - self.origin
            rows.append(row)
        last_t = steps[-1].t if steps else self.last_t
        recent = list(self.keeper.recent) if last_t - self._recent_flushed_at >= RECENT_FLUSH_S else None
        thin = bool(rows) and rows[-1]["t"] - self._thinned_at >= THIN_EVERY_S
        return Batch(list(steps), list(samples), rows, kept, last_t, recent, thin)

    def _write_steps(self, batch: Batch) -> None:
        if not batch.unsure:
            self.store.add_steps(self.run_id, batch.steps, kept_steps=batch.kept)
            return
        # Step rows replace themselves; intervals would be stored twice: those of the batch's kept steps (no other
        # write stores theirs) are dropped and stored again.
        self.store.add_steps(self.run_id, batch.steps, kept_steps=())
        self.store.replace_timeline(self.run_id, drop=sorted(batch.kept),
                                    steps=[step for step in batch.steps if step.step in batch.kept])

    def _write_samples(self, batch: Batch) -> None:
        # One transaction: all of the batch's rows are stored, or none. Reading the run's samples back costs
        # what a store process's restart does, and happens only then.
        if batch.unsure and batch.rows and self._has_sample(batch.rows[-1]):
            return
        self.store.add_samples(self.run_id, batch.rows)

    def _has_sample(self, row: dict) -> bool:
        return any(s.t == row["t"] and s.device == row["device"] and s.span_s is None
                   for s in self.store.samples(self.run_id))

    def _write_recent(self, batch: Batch) -> None:
        if batch.recent is not None:
            self._store_recent(batch.recent)

    def _write_thin(self, batch: Batch) -> None:
        if batch.thin:   # thinning again what is thinned changes nothing
            for age, bucket in THINNING:
                self.store.thin_samples(self.run_id, batch.rows[-1]["t"] - age, bucket)

    def _count(self, batch: Batch) -> None:
        self.timeline_kept += len(batch.kept)
        self.telemetry.add_samples(batch.samples)
        for step in batch.steps:
            self.telemetry.add_step(step.step, self.origin + step.t - step.time_s, self.origin + step.t)
        self.last_t = batch.last_t
        self.steps += len(batch.steps)
        if batch.recent is not None:
            self._recent_flushed_at = batch.last_t
        if batch.thin:
            self._thinned_at = batch.rows[-1]["t"]

    def _store_recent(self, steps: list[Step]) -> None:
        # The steps' own intervals are dropped too: only this write stores a step the keeper did not keep, so a
        # rewrite that was cut short after its commit, sent again, stores them once.
        drop = sorted(set(self._recent_stored) | {step.step for step in steps})
        self.store.replace_timeline(self.run_id, drop=drop, steps=steps)
        self._recent_stored = [step.step for step in steps]

    def finish(self) -> None:
        """The run ended: the last steps' intervals go to the store for good (again, if this raised)."""
        if self._finished:
            return
        self.resend()
        if self._final is None:
            self._final = self.keeper.take_recent()
        self._store_recent(self._final)
        self.timeline_kept += len(self._final)
        self._finished = True

    def add_profile(self, rank: int, device: str, t0: float, trace: bytes, *, again: bool = False) -> None:
        """A rank's profiler trace; ``again``: after a write cut short, only if the store does not have it."""
        if again and any(stored[:3] == (rank, device, t0) for stored in self.store.profiles(self.run_id)):
            return
        self.store.add_profile(self.run_id, rank, device, t0, trace)

    def telemetry_summary(self, devices_busy: list[float] | None, devices: list[str]) -> TelemetrySummary:
        self.telemetry.finish()
        telemetry = self.telemetry.summary()
        lines = disagreements(telemetry.util_mean, devices_busy, devices) if devices_busy else []
        return dataclasses.replace(telemetry, disagreement="; ".join(lines) or None)
