"""Checking predictions: the best few candidates run for a few steps each through RunSession, within a budget of
seconds, and measured as an experiment measures its points (engine/experiments/reduction.py ``reduce_point``:
its step time with its spread, and a run that others disturbed marked so).

Each check runs ``WARMUP`` steps and then enough for about ``MEASURED_S`` seconds of measured steps (at least
``FEWEST``, at most ``MOST``): a tiny model's 2 ms steps need many to show their spread, a large model's
second-long ones few. Its step is expected at its prediction times how much slower the checks so far measured
than predicted (a busy machine's runs are all slower: engine/advise/model_probe.py times CPU work). Before each check
its cost is estimated (the starts measured so far, or ``START_GUESS_S``, and its steps at the expected time); a
check that would overrun the budget is not started.
The runs are stored as any run is, labelled "advise: CANDIDATE".
"""
from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.advise.candidates import configured
from engine.advise.results import Measured, Ranked
from engine.config import ExperimentConfig
from engine.experiments.presets import Point
from engine.experiments.reduction import best_and_tied, reduce_point
from engine.results import ExperimentPoint

WARMUP = 2
FEWEST, MOST = 5, 40
MEASURED_S = 0.6
START_GUESS_S = 3.0      # a run's start and end beside its steps (1-2 s here with a warm fork server)
CHECKED = 3              # candidates checked at most


@dataclass(frozen=True)
class Checks:
    """The candidates with the checked ones measured, the best measured and those tied with it (experiments'
    rule: within its spread), and why checking stopped early where it did."""
    candidates: list[Ranked]
    best: str | None
    tied: list[str]
    stopped_by: str | None
    seconds: float


def steps_for(predicted_step_s: float) -> int:
    """Measured steps for about ``MEASURED_S`` seconds at the predicted step time."""
    return max(FEWEST, min(MOST, math.ceil(MEASURED_S / max(predicted_step_s, 1e-6))))


def check(ranked: list[Ranked], base: ExperimentConfig, budget_s: float, *, most: int = CHECKED, db_path=None,
          telemetry_hz: float = 10.0, on_progress: Callable[[str], None] | None = None,
          stop: threading.Event | None = None, sessions: list | None = None) -> Checks:
    """Run the first ``most`` fitting candidates of ``ranked`` (best predicted first). ``stop``: set to stop
    checking (the current run is stopped through ``sessions``, where the caller keeps the running one)."""
    started = time.perf_counter()
    stop = stop or threading.Event()
    starts: list[float] = []
    measured: dict[str, Measured] = {}
    points: list[ExperimentPoint] = []
    stopped_by = None
    chosen = [r for r in ranked if r.prediction.fits][:most]
    slowdowns: list[float] = []   # measured over predicted step of the checks so far: a busy machine's
    for index, entry in enumerate(chosen):
        expected = entry.prediction.step_s * (statistics.median(slowdowns) if slowdowns else 1.0)
        steps = steps_for(expected)
        start_cost = sum(starts) / len(starts) if starts else START_GUESS_S
        spent = time.perf_counter() - started
        if spent + start_cost + (WARMUP + steps) * expected > budget_s:
            stopped_by = (f"--budget-s {budget_s:g} allowed {index} check(s) of {len(chosen)}" if index else
                          f"--budget-s {budget_s:g} allows no check (a run takes about {start_cost:.2g} s to start)")
            break
        if stop.is_set():
            stopped_by = "stopped"
            break
        if on_progress:
            on_progress(f"check {index + 1} of {len(chosen)}: {entry.label}, {WARMUP + steps} steps")
        config = configured(base, entry.candidate).replace(steps=WARMUP + steps, warmup=WARMUP)
        began = time.perf_counter()
        result, summary = _run(config, entry.label, db_path, telemetry_hz, sessions)
        if summary is not None and summary.step_time_s is not None:
            starts.append(max(0.0, time.perf_counter() - began - summary.step_time_s.mean * config.steps))
            slowdowns.append(summary.step_time_s.mean / max(entry.prediction.step_s, 1e-9))
            point = reduce_point(Point(entry.label, config), [summary])
            points.append(point)
            measured[entry.label] = Measured(result.run_id, point.step_time_s.mean, point.step_time_s.std,
                                             point.throughput.mean, point.disturbed)
        else:
            measured[entry.label] = Measured(result.run_id, error=result.error or f"the run {result.status}")
    best, tied = best_and_tied(points)
    return Checks([replace(r, measured=measured.get(r.label)) for r in ranked], best, tied, stopped_by,
                  time.perf_counter() - started)


def _run(config: ExperimentConfig, label: str, db_path, telemetry_hz: float, sessions: list | None):
    from engine.run.session import RunSession
    session = RunSession(config, db_path=db_path, telemetry_hz=telemetry_hz, label=f"advise: {label}")
    if sessions is not None:
        sessions.append(session)
    try:
        session.start()
        result = session.wait()
    finally:
        if sessions is not None:
            sessions.remove(session)
    return result, result.summary
