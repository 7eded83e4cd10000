"""What the live view's header, the status line and the run box say about an experiment, without Qt.

An experiment (engine/experiments/runner.py ExperimentRunner) runs its points one after
another, each ``repeats`` times, and counts its runs 1..n: run k is repeat
(k-1) % repeats + 1 of point (k-1) // repeats + 1. Each text is a function of
where the experiment is (``PointRun``), the current run's progress
(``live_data.RunProgress``) or the experiment's result, so a test reads them
without a window.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.state import run_status
from app.state.live_data import RunProgress
from app.state.number_formats import format_duration
from engine.config import ExperimentConfig
from engine.experiments.presets import preset_title
from engine.results import ExperimentResult


@dataclass(frozen=True)
class PointRun:
    """The k-th of an experiment's n runs: which point of how many, and which repeat of it."""
    name: str                  # the preset: "compare-strategies"
    k: int
    n: int
    label: str                 # the point's: "pipeline"
    points: int
    repeats: int = 1
    config: ExperimentConfig | None = None   # the point's run

    @property
    def point(self) -> int:
        return (self.k - 1) // max(1, self.repeats) + 1

    @property
    def repeat(self) -> int:
        return (self.k - 1) % max(1, self.repeats) + 1

    @property
    def header(self) -> str:
        """"Compare strategies · point 3 of 5: pipeline · run 2 of 3" (one repeat: no run count)."""
        text = f"{preset_title(self.name)} · point {self.point} of {self.points}: {self.label}"
        return text + (f" · run {self.repeat} of {self.repeats}" if self.repeats > 1 else "")

    @property
    def mark(self) -> str:
        """The line's label on the telemetry plots where this run starts: "pipeline", "pipeline 2/3" for a
        repeat (two lines labelled alike read as one entry shown twice)."""
        return self.label + (f" {self.repeat}/{self.repeats}" if self.repeats > 1 else "")

    @property
    def bar_text(self) -> str:
        """The progress bar's label: it counts the experiment's runs."""
        return f"run {self.k} of {self.n}: {self.label}"


def running_text(run: PointRun, progress: RunProgress, first_run: bool = False) -> str:
    """The status line while the experiment goes: where it is, then what the current run does."""
    starting = run_status.starting_text(progress, first_run)
    if starting is not None:
        return f"{run.header} · {starting}"
    if not progress.steps_done:
        return run.header
    mean = sum(progress.step_times) / len(progress.step_times) if progress.step_times else 0.0
    return f"{run.header} · step {progress.steps_done}/{progress.steps_total} · {mean * 1000:.1f} ms/step"


def finished_text(result: ExperimentResult) -> str:
    """"Compare strategies finished: 5 points, best pipeline"; failed points are counted after it."""
    points = result.points
    text = f"{preset_title(result.name)} {result.status}: {len(points)} point{'s' if len(points) != 1 else ''}"
    if result.verdict():
        text += f", {result.verdict()}"
    failed = sum(1 for p in points if p.error)
    if failed:
        text += f"; {failed} point{'s' if failed != 1 else ''} failed"
    return text


def finished_title(result: ExperimentResult) -> str:
    """The live view's header once the experiment ended: the machine's telemetry goes on."""
    return f"Live: this machine's telemetry · {finished_text(result)}"


def failed_title(name: str) -> str:
    return f"Live: this machine's telemetry · {preset_title(name)} failed"


def time_left_text(run: PointRun, progress: RunProgress, elapsed_s: float) -> str | None:
    """The experiment's own time left, beside its progress bar: "≈ 1 min 40 s left of 15 runs", from the time
    its runs took so far (the current one counted by its share of steps done); None until its first run ended
    (that run's start-up over a few steps done would say many times the truth: the run's own time left shows)."""
    if run.k < 2 or elapsed_s <= 0:
        return None
    current = progress.steps_done / progress.steps_total if progress.steps_total else 0.0
    done = run.k - 1 + min(1.0, current)
    return f"≈ {format_duration(elapsed_s / done * (run.n - done))} left of {run.n} runs"
