"""Runs a preset's points, each ``repeats`` times through RunSession, under one experiment id in the store, and
reduces them to the experiment's result; stoppable between or during runs, keeping what finished."""
from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from engine.config import ExperimentConfig
from engine.events import WorkerEvent
from engine.experiments.presets import PRESETS, limits
from engine.experiments.reduction import best_and_tied, failed_point, reduce_point, with_predictions
from engine.results import ExperimentPlan, ExperimentPoint, ExperimentResult, PlannedPoint


class ExperimentRunner:
    """Runs a preset's points; ``stop()`` ends the current run and keeps the finished ones."""

    def __init__(self, name: str, base: ExperimentConfig, *, repeats: int = 3, db_path=None,
                 telemetry_hz: float = 10.0,
                 on_progress: Callable[[int, int, str], None] | None = None,
                 on_event: Callable[[WorkerEvent], None] | None = None,
                 on_samples: Callable[[list], None] | None = None):
        if name not in PRESETS:
            raise ValueError(f"unknown experiment {name!r}; choose one of: {', '.join(PRESETS)}")
        if repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {repeats}")
        if base.nodes:
            # Their points compare strategies that keep their devices in one process, which cannot span nodes.
            raise ValueError("experiments run on this machine; --nodes (the Nodes field) applies to a single run")
        self.preset = PRESETS[name]
        self.base = base
        self.repeats = repeats
        self.db_path = db_path
        self.telemetry_hz = telemetry_hz
        self.on_progress = on_progress
        self.on_event = on_event
        self.on_samples = on_samples
        self.points = self.preset.points_for(base)
        self.notes = limits(name, base)
        self._stop = threading.Event()
        self._starting = threading.Lock()
        self._session = None
        self.experiment_id: str | None = None

    @property
    def total_runs(self) -> int:
        return len(self.points) * self.repeats

    def stop(self) -> None:
        with self._starting:  # a run being launched now is either not started or stopped
            self._stop.set()
            session = self._session
        if session is not None:
            session.stop()

    def is_running_a_run(self) -> bool:
        session = self._session
        return session is not None and session.is_running()

    def kill(self) -> None:
        """Stop, and end the current run's processes at once (when a stop is not honoured)."""
        with self._starting:
            self._stop.set()
            session = self._session
        if session is not None:
            session.kill()

    def run(self) -> ExperimentResult:
        from engine.run.session import RunSession
        from engine.store import open_store
        with open_store(self.db_path) as store:
            self.experiment_id = store.create_experiment(self.preset.name, ExperimentPlan(
                base=self.base.to_dict(), repeats=self.repeats,
                points=[PlannedPoint(p.label, p.config.to_dict(), p.x, p.series) for p in self.points]))
        results: list[ExperimentPoint] = []
        k = 0
        for point in self.points:
            runs, failures = [], []
            for _ in range(self.repeats):
                if self._stop.is_set():
                    break
                k += 1
                if self.on_progress:
                    self.on_progress(k, self.total_runs, point.label)
                # Checked and started under the lock that stop() takes: a stop that comes while
                # this run is being launched is never lost (it either prevents or stops it).
                with self._starting:
                    if self._stop.is_set():
                        break
                    session = RunSession(point.config, db_path=self.db_path, telemetry_hz=self.telemetry_hz,
                                         experiment_id=self.experiment_id, label=point.label,
                                         on_event=self.on_event, on_samples=self.on_samples)
                    self._session = session
                    session.start()
                result = session.wait()
                self._session = None
                if result.store_failed:   # every later run would fail the same way: the experiment ends here
                    raise sqlite3.OperationalError(result.error)
                if result.status == "finished" and result.summary and result.summary.step_time_s is not None:
                    runs.append(result.summary)
                elif result.status == "finished":  # every step was warm-up: nothing to compare
                    failures.append((result.run_id, "finished without a measured step (--steps not above --warmup)"))
                elif result.status == "failed":
                    failures.append((result.run_id, result.error))
            if runs:
                results.append(reduce_point(point, runs))
            elif failures:
                results.append(failed_point(point.label, point.config.strategy, point.x, failures[0][1],
                                            [r for r, _ in failures], point.series))
            if self._stop.is_set():
                break
        results = with_predictions(results, self.db_path)
        automatic = next((p for p in results if p.x is None and p.label.startswith("balanced") and p.split), None)
        best, tied = best_and_tied(results)
        summary = ExperimentResult(experiment_id=self.experiment_id, name=self.preset.name,
                                   status="stopped" if self._stop.is_set() else "finished",
                                   best=best, tied=tied, points=results, notes=self.notes,
                                   automatic_split=automatic.split if automatic else None)
        with open_store(self.db_path) as store:
            store.finish_experiment(self.experiment_id, summary)
        return summary
