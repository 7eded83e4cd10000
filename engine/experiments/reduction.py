"""A point's runs reduced to the point (docs/summary.md), the best and the tied among points, the what-if's
predictions beside them, and an experiment rebuilt from the runs it stored."""
from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
from typing import TYPE_CHECKING

from engine import forkserver
from engine.config import ExperimentConfig
from engine.experiments.presets import Point
from engine.planner.what_if import Prediction
from engine.record.summary import stage_balance
from engine.record.time_by_kind import input_share
from engine.results import Bubble, ExperimentPoint, ExperimentResult, RunSummary, mean_std
from engine.wire.children import read_list

if TYPE_CHECKING:
    from engine.store import ExperimentRecord


def reduce_point(point: Point, runs: list[RunSummary]) -> ExperimentPoint:
    """A point over its repeats (docs/summary.md): the one reduction of runs that every view reads."""
    first = runs[0]
    per_run = [r.stage_busy for r in runs if r.stage_busy]
    stage_busy = [statistics.fmean(v) for v in zip(*per_run, strict=False)] if per_run else None
    return ExperimentPoint(
        label=point.label,
        strategy=point.config.strategy,
        x=point.x,
        devices=first.devices,
        split=first.split,
        micro_batches=first.micro_batches,
        schedule=first.schedule,
        step_time_s=mean_std([r.step_time_s.mean for r in runs], [r.step_time_s.std for r in runs]),
        step_time_range=[min(r.step_time_s.mean for r in runs), max(r.step_time_s.mean for r in runs)],
        throughput=mean_std([r.throughput.mean for r in runs], [r.throughput.std for r in runs]),
        bubble=Bubble(measured=_mean_of([r.bubble.measured for r in runs]), theory=first.bubble.theory,
                      formula=first.bubble.formula),
        devices_busy=[statistics.fmean(v) for v in zip(*(r.devices_busy or [] for r in runs), strict=False)],
        # Balance of the mean busy shares, so the figure and the shares shown beside it agree.
        stage_busy=stage_busy,
        stage_balance=stage_balance(point.config.strategy, first.devices, stage_busy),
        util_mean=first.telemetry.util_mean if first.telemetry else None,
        peak_mem_bytes=first.telemetry.mem_peak_bytes if first.telemetry else None,
        batch_split=first.common_batch_split,
        run_ids=[r.run_id for r in runs],
        tensor_memory=first.tensor_memory,
        communication=first.communication,
        disturbed=_disturbed(runs),
        input_wait=_input_wait(runs),
        series=point.series,
        mfu=_mean_of([r.efficiency.mfu if r.efficiency else None for r in runs]),
        samples_per_joule=_mean_of([r.efficiency.samples_per_joule if r.efficiency else None for r in runs]),
    )


def _input_wait(runs: list[RunSummary]) -> float | None:
    """The mean over the runs of the largest share of a step a device spends on its input (``input_share``:
    loading it in its own process with no loader workers, waiting for them with some)."""
    shares = [max(input_share(d) for d in r.time_by_kind) for r in runs if r.time_by_kind]
    return statistics.fmean(shares) if shares and any(shares) else None


def _disturbed(runs: list[RunSummary]) -> str | None:
    """The point's "disturbed" mark: its first disturbed run's, with how many of its runs were."""
    marks = [r.telemetry.disturbed for r in runs if r.telemetry and r.telemetry.disturbed]
    if not marks:
        return None
    return marks[0] if len(runs) == 1 else f"{len(marks)} of {len(runs)} runs disturbed; {marks[0]}"


def with_predictions(points: list[ExperimentPoint], db_path) -> list[ExperimentPoint]:
    """Each point's step time as engine.planner.what_if predicts it from the first run of the first measured pipeline
    point with micro-batches (else the naive split's: GPipe with one, whose per-call costs say less about
    smaller micro-batches), so a sweep shows measured beside predicted. Only for points on the reference's
    devices, with its split, or a split of their own for another number of stages per device (a what-if
    keeps the model's cut per device): a split-point sweep's other splits, or other device counts, get none.
    Computed by ``main.py what-if`` in a child (the multi-stage schedules' lists need torch, which neither
    the command line's process nor the app's imports); an experiment whose prediction fails keeps its points."""
    from engine.run.session import ROOT
    staged = [p for p in points if p.step_time_s is not None and p.split and p.run_ids]
    reference = next((p for p in staged if (p.micro_batches or 1) > 1), staged[0] if staged else None)
    if reference is None:
        return points
    argv = ["what-if", reference.run_ids[0], "--json", *(["--db", str(db_path)] if db_path is not None else [])]
    try:
        # Forked by the fork server the runs used (torch already imported there): a fresh interpreter's imports
        # took 3.5 s at every experiment's end.
        done = forkserver.run_module("main", input="", argv=argv, env=dict(os.environ), cwd=ROOT, timeout=120)
        rows = read_list(Prediction, done.stdout, "the what-if child") if done.returncode == 0 else []
    except (OSError, ValueError, subprocess.TimeoutExpired, forkserver.ForkServerError):   # WireError: a ValueError
        rows = []
    predicted = {(r.schedule, r.stages_per_device, r.micro_batches): r.step_time_s for r in rows}

    def comparable(point: ExperimentPoint) -> bool:
        return (point.split is not None and point.devices == reference.devices
                and (point.split == reference.split or point.stages_per_device != reference.stages_per_device))
    return [dataclasses.replace(p, predicted_step_s=predicted.get(
                (p.schedule or "gpipe", p.stages_per_device, p.micro_batches or 1))) if comparable(p) else p
            for p in points]


def _mean_of(values: list) -> float | None:
    """The mean of the values measured (a run of another version may lack one), None if none was."""
    measured = [v for v in values if v is not None]
    return statistics.fmean(measured) if measured else None


def failed_point(label: str, strategy: str | None, x: float | None, error: str, run_ids: list[str],
                 series: str | None = None) -> ExperimentPoint:
    """A point none of whose runs could be measured: shown, so a sweep never hides a point that could not run."""
    return ExperimentPoint(label=label, strategy=strategy, x=x, error=error, run_ids=run_ids, series=series)


def stored_result(store, experiment: ExperimentRecord) -> ExperimentResult:
    """An experiment as stored: its result, or for one that never finished (the app closed, the machine
    went down), the result rebuilt from the runs it kept, by the same reduction (status "incomplete")."""
    if experiment.result is not None:
        return experiment.result
    planned = {p.label: p for p in experiment.plan.points}
    groups: dict[str, list] = {}
    for run in reversed(store.list_runs(experiment_id=experiment.id)):  # oldest first: the preset's order
        if run.status == "finished" and run.summary:
            groups.setdefault(run.label or run.id, []).append(run)
    points = []
    for label, runs in groups.items():
        x = planned[label].x if label in planned else None
        measured = [r.summary for r in runs if r.summary.step_time_s and r.summary.throughput]
        if not measured:
            points.append(failed_point(label, runs[0].summary.strategy, x, "its runs have no measured step",
                                       [r.id for r in runs], planned[label].series if label in planned else None))
            continue
        try:
            stored = planned[label].config if label in planned else None
            point = Point(label, ExperimentConfig.from_dict(stored) if stored else runs[0].config, x,
                          planned[label].series if label in planned else None)
            points.append(reduce_point(point, measured))
        except (AttributeError, KeyError, TypeError, ValueError, statistics.StatisticsError) as exc:
            # Runs stored by another version: shown as a point that could not be read, not a broken history.
            points.append(failed_point(label, runs[0].summary.strategy, x,
                                       f"could not be rebuilt from its runs: {type(exc).__name__}: {exc}",
                                       [r.id for r in runs], planned[label].series if label in planned else None))
    best, tied = best_and_tied(points)
    return ExperimentResult(experiment_id=experiment.id, name=experiment.name, status="incomplete",
                            best=best, tied=tied, points=points)


def best_and_tied(points: list[ExperimentPoint]) -> tuple[str | None, list[str]]:
    """The fastest of every point measured (a sweep's automatic split too, so "best" means the same in the
    bars, the table and the sweep that show them all), and the points whose spread reaches into its
    (ExperimentPoint.spread): where there are any, no point is best, they are tied."""
    measured = [p for p in points if p.step_time_s is not None]
    if not measured:
        return None, []
    fastest = min(measured, key=lambda p: p.step_time_s.mean)
    reach = fastest.spread()[1]
    tied = [p.label for p in sorted(measured, key=lambda p: p.step_time_s.mean)
            if p is not fastest and p.spread()[0] <= reach]
    return fastest.label, tied
