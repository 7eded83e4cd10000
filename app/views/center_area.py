"""CenterArea: the window's middle, errors over the tabs Plots, Plan, Memory and Experiment result.

The live view follows the run's progress it is given (``follow_run``): what the progress
announces (app/state/live_data.py ``RunProgress.applied``) is drawn here, the lanes
and plan once the run starts, each step's curves, timeline and memory bars, so the
controller that feeds the progress draws nothing itself. Stored runs and an
experiment's result come through ``show_stored_runs`` and ``show_experiment_result``.
"""
from __future__ import annotations

import time

from PySide6 import QtCore, QtWidgets

from app.state import run_status
from app.state.finding_rows import MEMORY_TAB
from app.state.live_data import RunProgress, TelemetryHistory, physical_names
from app.state.stored_run import RunData, compared_memory_figures, memory_figures
from app.views.error_panel import ErrorPanel
from app.views.experiment_results import ExperimentResultsView
from app.views.flash import flash
from app.views.layout import tabs
from app.views.memory_view import MemoryView
from app.views.plan_view import PlanView
from app.views.plots.panel import PlotPanel
from engine.events import Finished, Launched, Started, WorkerEvent
from engine.results import ExperimentResult, RunSummary, Step

MEMORY_REDRAW_S = 0.5    # the Memory tab's bars change rarely after the first steps


class CenterArea(QtWidgets.QWidget):
    sigLiveViewTaken = QtCore.Signal()        # the live plots came to the front: stored runs leave the view
    sigExperimentShown = QtCore.Signal(str)   # experiment id now in the result view

    def __init__(self, telemetry: TelemetryHistory, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.telemetry = telemetry
        self.error_panel = ErrorPanel()
        self.plots = PlotPanel(telemetry)
        self._timeline_hint = self.plots.timeline.hint()   # shown when no run goes
        self.results = ExperimentResultsView()
        self.plan_view = PlanView()
        self.memory_view = MemoryView()
        self._memory_drawn_at = 0.0     # the live memory view is redrawn at most every MEMORY_REDRAW_S
        # The live (or stored) run's plots, its schedule's plan, and an experiment's result: one in view at a time.
        self.tabs = tabs((self.plots, "Plots"), (self.plan_view, "Plan"), (self.memory_view, "Memory"),
                         (self.results, "Experiment result"), name="centerTabs")
        self.tabs.currentChanged.connect(lambda _index: self._show_live_memory())
        self.plots.findings.sigWhy.connect(self._show_why)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(6, 8, 8, 4)
        layout.setSpacing(6)
        layout.addWidget(self.error_panel)
        layout.addWidget(self.tabs, 1)

    # -- the live run ---------------------------------------------------------------------------
    def follow_run(self, progress: RunProgress, take_view: bool, mark: str) -> None:
        """The live plots follow ``progress``'s run from its first event; ``take_view``: they come to the front;
        ``mark``: the text of the line where it starts on the telemetry plots."""
        self.run_progress().applied.disconnect(self._draw_event)
        progress.applied.connect(self._draw_event)
        self.telemetry.set_physical(physical_names(progress.config))
        self.plots.begin_run(progress, show=take_view)
        self.mark_telemetry(mark)
        if take_view:
            self.plots.set_mode("live", run_status.live_title(progress))
            self.tabs.setCurrentWidget(self.plots)
            self.sigLiveViewTaken.emit()

    def _show_why(self, figure: str) -> None:
        """A finding's "why" names a figure of the Memory tab: that tab, outlined (the Plots tab's flash there)."""
        if figure in MEMORY_TAB:
            self.tabs.setCurrentWidget(self.memory_view)
            flash(self.memory_view)

    def run_progress(self) -> RunProgress:
        """The live view's run's progress (app/state/live_data.py RunProgress)."""
        return self.plots.progress

    def _draw_event(self, event: WorkerEvent) -> None:
        """What the run's progress just applied, drawn."""
        progress = self.run_progress()
        match event:
            case Launched() if not progress.devices:
                self.plots.set_run_devices(event.devices or list(event.device_pids))   # the lanes, in stage order
            case Started():
                self.plots.set_run_devices(progress.devices)
                self.show_plan(event.plan, progress.devices, progress.config.schedule)
                self.plots.set_live_title(run_status.live_title(progress))
                self.plots.refresh_bubble()   # the worker's theoretical bubble for this run
                self._name_mfu_peak(run_status.mfu_peak_words(progress.config.peak))
            case Step():
                self.plots.add_step(event)
                if time.perf_counter() - self._memory_drawn_at >= MEMORY_REDRAW_S:
                    self._show_live_memory()
            case Finished():
                self.telemetry.end_run()
                if event.summary is not None and event.summary.efficiency is not None:
                    self._name_mfu_peak(run_status.mfu_peak_words(progress.config.peak, event.summary.efficiency))
                if event.summary is not None and self.plots.steps.fill_mfu(event.summary.efficiency):
                    self.plots.redraw(force=True)   # a watched run's MFU, known once it ended

    def _show_live_memory(self) -> None:
        """The Memory tab from the run's progress, while it is in view: drawing it costs the cores the ranks use."""
        if self.tabs.currentWidget() is self.memory_view and self.plots.mode == "live":
            self._memory_drawn_at = time.perf_counter()
            self.memory_view.show_figures(*self.run_progress().memory_figures())

    def show_timeline_hint(self, text: str | None) -> None:
        """The timeline's line while it has no steps: what the starting run does; None: its own hint."""
        self.plots.timeline.set_hint(text or self._timeline_hint)

    def title_live_view(self, text: str) -> None:
        self.plots.set_live_title(text)

    def mark_telemetry(self, text: str) -> None:
        """A line across the telemetry plots now (a run's start or end)."""
        self.plots.mark_run(time.perf_counter() - self.telemetry.origin, text)

    def settle_plots(self) -> None:
        self.plots.redraw(force=True)
        self.plots.refresh_bubble()

    def refresh_bubble(self) -> None:
        self.plots.refresh_bubble()

    def watching_live(self) -> bool:
        """The user looks at the live plots (an experiment's later runs take the view only then)."""
        return self.tabs.currentWidget() is self.plots and self.plots.mode == "live"

    # -- stored runs and experiments ------------------------------------------------------------
    def _name_mfu_peak(self, words: str) -> None:
        """The MFU plot's title says what its percentages are of (the peak), as its live or stored figure."""
        plot = self.plots.series_plots["efficiency"]
        plot.show_title(f"{plot.spec.title if plot.figure is None else plot.figure.title} · {words}")

    def show_stored_runs(self, runs: list[RunData]) -> None:
        self.plots.show_runs(runs)
        if len(runs) == 1 and runs[0].summary is not None and runs[0].summary.efficiency is not None:
            self._name_mfu_peak(run_status.mfu_peak_words(runs[0].config.peak, runs[0].summary.efficiency))
        first = runs[0].summary if runs and runs[0].summary else None
        self.memory_view.show_figures(*(compared_memory_figures(runs) if runs else memory_figures(RunSummary())))
        self.show_plan(first.plan if first else None, list(first.devices) if first else [],
                       first.schedule if first else None)
        self.tabs.setCurrentWidget(self.plots)

    def show_plan(self, plan: list[list[str]] | None, devices: list[str], schedule: str | None) -> None:
        """The run's schedule plan: drawn in the Plan tab, and naming micro-batches in the timeline's hover."""
        self.plan_view.show_plan(plan, devices, schedule)
        self.plots.timeline.set_plan(plan, devices)

    def show_experiment_result(self, result: ExperimentResult) -> None:
        from engine.experiments import PRESETS
        preset = PRESETS.get(result.name)
        self.results.show_result(result, preset.description if preset else "")
        self.tabs.setCurrentWidget(self.results)
        self.sigExperimentShown.emit(result.experiment_id or "")

    def show_result_view(self) -> None:
        self.tabs.setCurrentWidget(self.results)

    def experiment_in_view(self) -> str | None:
        """The experiment whose result is in view, if that tab is."""
        return self.results.experiment_id if self.tabs.currentWidget() is self.results else None

    # -- errors ---------------------------------------------------------------------------------
    def show_error(self, message: str, tb: str | None = None) -> None:
        self.error_panel.show_error(message, tb)

    def hide_error(self) -> None:
        self.error_panel.hide()
