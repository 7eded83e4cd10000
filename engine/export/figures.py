"""A stored run's or experiment's figures: the store's rows, read as an export needs them, into engine.figures.

A long run's figures come from every k-th step and bucketed telemetry: a chart
draws a pixel column's worth either way, and an export must not load a day of
rows into memory. The titles (and so every file drawn from them) say so.
"""
from __future__ import annotations

import dataclasses

from engine.experiments import preset_title, stored_result
from engine.export.errors import ExportError
from engine.export.standing import standing
from engine.figures import Figure, RunView, experiment_figures as figures_of_result, run_figures as figures_of_run
from engine.figures.timeline import TIMELINE_STEPS
from engine.results import ExperimentResult, RunSummary
from engine.store import Store

EXPORT_ROWS = 100_000   # at most this many step rows, and telemetry rows, in a run's figures
STANDING_TABLES = ("step-time", "throughput")   # the bars a point's standing is judged on: their tables say it


def run_view(store: Store, run_id: str) -> RunView:
    run = store.get_run(run_id)
    if run is None:
        raise ExportError(f"no run with id {run_id!r}")
    rows, span = store.sample_span(run_id)
    bucket = span / EXPORT_ROWS if rows > EXPORT_ROWS else None
    # every step's, or a sample (engine.record.timeline_keeper)
    kept = store.timeline_steps(run_id, last=TIMELINE_STEPS)
    return RunView(summary=run.summary or RunSummary(), steps=store.steps(run_id, at_most=EXPORT_ROWS),
                   samples=store.samples(run_id, bucket_s=bucket), timeline=store.timeline(run_id, steps=kept),
                   step_count=store.step_count(run_id), timeline_steps=store.timeline_step_count(run_id),
                   warmup=run.config.warmup, label=run.id, config=run.config.to_dict(),
                   sample_rows=rows, sample_bucket_s=bucket)


def run_figures(store: Store, run_id: str) -> list[Figure]:
    return figures_of_run(run_view(store, run_id))


def experiment_figures(store: Store, experiment_id: str) -> list[Figure]:
    experiment = store.get_experiment(experiment_id)
    if experiment is None:
        raise ExportError(f"no experiment with id {experiment_id!r}")
    result = stored_result(store, experiment)
    result = result if result.name else dataclasses.replace(result, name=experiment.name)
    return [with_standing(f, result) for f in figures_of_result(result, preset_title(result.name))]


def with_standing(figure: Figure, result: ExperimentResult) -> Figure:
    """The step time's and throughput's tables (their CSV) with each point's standing ("best", "tied", "") and
    whether a run of it was disturbed (empty where not), so a spreadsheet reads what the app and the report say."""
    if figure.name not in STANDING_TABLES:
        return figure
    points = {p.label: p for p in result.points}
    columns, rows = [*figure.columns, "standing"], [[*row, standing(result, row[0])] for row in figure.rows]
    if "disturbed" not in columns:
        columns.append("disturbed")
        rows = [[*row, getattr(points.get(row[0]), "disturbed", None) or ""] for row in rows]
    return dataclasses.replace(figure, columns=columns, rows=rows)
