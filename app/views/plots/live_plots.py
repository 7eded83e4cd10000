"""The live view's plots, one definition each: its figure, where its data is, how it is drawn.

PlotPanel (app/views/plots/panel.py) lays them out two to a row in this order and redraws
each from its data; a stored run draws the same figures (engine/figures/run.py), so
titles, units and colours agree with the exports. A new live plot is one definition
here and its data (a buffer in app/state/live_data.py's TelemetryHistory or StepHistory).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.figures.figure import Figure
from engine.figures.run import EFFICIENCY, LOSS, MEMORY, MIB, THROUGHPUT, UTILIZATION


@dataclass(frozen=True)
class LivePlot:
    figure: Figure
    per_device: bool            # a curve per device over time (telemetry), or curves over the steps
    data: Callable[[Any], Any]  # TelemetryHistory -> {device: RingBuffer}; StepHistory -> a buffer, or one a device
    scale: float = 1.0          # drawn value per stored value (memory: bytes kept, MiB drawn)
    smoothed: bool = False      # raw samples faint under their one-second trailing mean, the core's total beside
    named_by_run: bool = False  # its series are cores, named in the legend by the run's device on each

    @property
    def name(self) -> str:
        return self.figure.name


LIVE_PLOTS = (
    LivePlot(UTILIZATION, True, lambda telemetry: telemetry.util, smoothed=True, named_by_run=True),
    LivePlot(MEMORY, True, lambda telemetry: telemetry.mem, scale=1 / MIB),
    LivePlot(THROUGHPUT, False, lambda steps: steps.throughput),
    LivePlot(LOSS, False, lambda steps: steps.loss),
    LivePlot(EFFICIENCY, False, lambda steps: steps.mfu),
)
