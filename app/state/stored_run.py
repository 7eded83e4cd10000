"""A stored run, loaded for display (``RunData``), and the memory figures of a finished run and of stored runs
compared (no Qt). The run in progress is app/state/live_data.py's ``RunProgress``; once it ends it shows its
summary's memory figures as a stored run does."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.config import ExperimentConfig
from engine.figures import RunView
from engine.figures.figure import Figure
from engine.figures.run import communication_figure, tensor_memory_figure
from engine.figures.run_names import run_names
from engine.results import RunSummary, Sample, Step
from engine.traces.as_run import is_trace_run


@dataclass
class RunData:
    """One stored run, loaded for display."""
    run_id: str
    label: str
    status: str
    config: ExperimentConfig
    summary: RunSummary | None
    error: str | None
    steps: list[Step] = field(default_factory=list)      # every step, or every k-th of a long run
    timeline: list[tuple] = field(default_factory=list)  # the intervals of the last steps that kept them
    samples: list[Sample] = field(default_factory=list)
    step_count: int = 0          # steps stored
    timeline_steps: int = 0      # of which with every interval (all, or a sample: engine.record.timeline_keeper)

    def view(self) -> RunView:
        """What the run's figures are drawn from, as the history loaded it (history_panel.load_runs)."""
        return RunView(summary=self.summary or RunSummary(), steps=self.steps, samples=self.samples,
                       timeline=self.timeline, step_count=self.step_count, timeline_steps=self.timeline_steps,
                       warmup=self.config.warmup, label=self.label, config=self.config.to_dict())

    def timeline_note(self) -> str:
        """Which steps' intervals the store kept, when not all of them."""
        if self.timeline_steps >= self.step_count:
            return ""
        if is_trace_run(self.config.strategy):   # engine/traces/lanes.py keeps the last iterations' lanes alone
            return f"lanes kept for the last {self.timeline_steps:,} of {self.step_count:,} iterations"
        return (f"full timelines kept for {self.timeline_steps:,} of {self.step_count:,} steps "
                "(the first and last 200, an even sample, the outliers)")


def memory_figures(summary: RunSummary) -> tuple[Figure, Figure]:
    """A finished run's tensor memory (its most over the measured steps) and communication per step, per device."""
    devices = list(summary.devices)
    return (tensor_memory_figure(devices, summary.tensor_memory or [None] * len(devices)),
            communication_figure(devices, summary.communication or [None] * len(devices)))


def compared_memory_figures(runs: list[RunData]) -> tuple[Figure, Figure]:
    """Several stored runs' tensor memory and communication side by side: a bar per run and device, named
    "<run> · <device>" with each run named by what sets it apart (engine/figures/run_names.py), as the
    Plots tab's legends are; one run's figures as ``memory_figures``."""
    summaries = [run.summary or RunSummary() for run in runs]
    if len(runs) == 1:
        return memory_figures(summaries[0])
    names = run_names([run.config.to_dict() for run in runs], [run.label for run in runs], summaries)
    bars = [(f"{name} · {device}", memory, comm) for name, s in zip(names, summaries, strict=True)
            for device, memory, comm in zip(s.devices, s.tensor_memory or [None] * len(s.devices),
                                            s.communication or [None] * len(s.devices), strict=False)]
    labels = [label for label, _, _ in bars]
    return (tensor_memory_figure(labels, [memory for _, memory, _ in bars]),
            communication_figure(labels, [comm for _, _, comm in bars]))
