"""An experiment's results, typed: the points it planned and ran, their means and spread, the best and ties."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from engine.results.run_summary import Bubble, Communication, MeanStd, TensorMemory


@dataclass(frozen=True)
class PlannedPoint:
    """A point an experiment set out to run: its label, its config as stored (ExperimentConfig.to_dict), its
    swept value and line."""
    label: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    x: float | None = None
    series: str | None = None     # the sweep's line it is on (ExperimentPoint.series)


@dataclass(frozen=True)
class ExperimentPlan:
    """What an experiment set out to run, stored as it starts (the store's ``params``): the base config, the
    runs per point and the points, so an experiment that never finished is rebuilt from the runs it kept."""
    base: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    points: list[PlannedPoint] = field(default_factory=list)


@dataclass(frozen=True)
class ExperimentPoint:
    label: str
    strategy: str | None = None
    x: float | None = None               # the swept value; None when nothing is swept
    devices: list[str] = field(default_factory=list)
    split: list[int] | None = None
    micro_batches: int | None = None
    schedule: str | None = None
    step_time_s: MeanStd | None = None   # mean and std of the runs' means (one run: its step-to-step std)
    step_time_range: list[float] | None = None   # [min, max] of the runs' mean step times
    throughput: MeanStd | None = None
    bubble: Bubble = field(default_factory=Bubble)
    devices_busy: list[float] = field(default_factory=list)
    stage_busy: list[float] | None = None
    stage_balance: float | None = None
    util_mean: list[float | None] | None = None
    peak_mem_bytes: list[int | None] | None = None
    batch_split: list[int] | None = None
    run_ids: list[str] = field(default_factory=list)
    error: str | None = None             # the point's runs failed: why
    # engine.planner.what_if's step time, from one of its runs (experiments.with_predictions)
    predicted_step_s: float | None = None
    tensor_memory: list[TensorMemory | None] | None = None   # per device, its first run's (memory repeats)
    communication: list[Communication | None] | None = None  # per device, per step, its first run's
    disturbed: str | None = None         # a run of the point was disturbed (TelemetrySummary.disturbed): which, how
    input_wait: float | None = None      # the share of its step the device most on its input spends so
                                         # (time_by_kind.input_share), mean over the runs; None where none is
    series: str | None = None            # the sweep's line it belongs to (default: its strategy's)
    mfu: float | None = None             # the run's MFU (Efficiency.mfu), mean over the runs that have one
    samples_per_joule: float | None = None   # likewise (Efficiency.samples_per_joule: GPUs' energy counters)

    def spread(self) -> tuple[float, float] | None:
        """The step times this point's measurement cannot tell apart: mean ± std, widened to its runs'
        min-max. None for a point not measured."""
        if self.step_time_s is None:
            return None
        low, high = self.step_time_s.mean - self.step_time_s.std, self.step_time_s.mean + self.step_time_s.std
        if self.step_time_range:
            low, high = min(low, self.step_time_range[0]), max(high, self.step_time_range[1])
        return low, high

    @property
    def stages_per_device(self) -> int | None:
        return (len(self.split) + 1) // len(self.devices) if self.split and self.devices else None


@dataclass(frozen=True)
class ExperimentResult:
    experiment_id: str | None = None
    name: str = ""
    status: str = "finished"             # finished, stopped, or incomplete (rebuilt from its runs)
    best: str | None = None              # the fastest measured point's label
    tied: list[str] = field(default_factory=list)   # points within the fastest's spread: then no point is best
    points: list[ExperimentPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    automatic_split: list[int] | None = None
    error: str | None = None             # why the experiment could not go on (status "failed")

    def point(self, label: str) -> ExperimentPoint | None:
        return next((p for p in self.points if p.label == label), None)

    @property
    def measured(self) -> list[ExperimentPoint]:
        return [p for p in self.points if p.step_time_s is not None]

    @property
    def winner(self) -> str | None:
        """The best point's label when it beats every other beyond their spread; None when tied."""
        return None if self.tied else self.best

    def ranked_by(self, key: str) -> list[ExperimentPoint]:
        """The measured points that have ``key`` ("mfu", "samples_per_joule"), most first."""
        return sorted((p for p in self.measured if getattr(p, key) is not None), key=lambda p: -getattr(p, key))

    def rankings(self) -> list[str]:
        """"by MFU: pipeline > ddp > single", and by samples per joule, where two points or more have one."""
        lines = []
        for key, name in (("mfu", "MFU"), ("samples_per_joule", "samples per joule")):
            ranked = self.ranked_by(key)
            if len(ranked) > 1:
                lines.append(f"by {name}: " + " > ".join(p.label for p in ranked))
        return lines

    def verdict(self) -> str | None:
        """How views name the outcome: "best pipeline", or "tied: pipeline, ddp (within their spread)"."""
        if self.best is None:
            return None
        if self.tied:
            return f"tied: {', '.join([self.best, *self.tied])} (within their spread)"
        return f"best {self.best}"


def mean_std(means: list[float], within: list[float]) -> MeanStd:
    """Across repeats when there are several; otherwise the single run's own step-to-step std."""
    mean = statistics.fmean(means)
    std = statistics.stdev(means) if len(means) > 1 else (within[0] if within else 0.0)
    return MeanStd(mean, std)
