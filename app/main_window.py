"""MainWindow: the experiment on the left, live plots in the middle, history and log below.

The window lays out the views, makes the controllers and wires their signals. What a
user action sets going is a controller's (app/controllers/: RunFlow, PlanFlow, WhatIfFlow,
ExperimentFlow, HistoryFlow, ReportExporter, CloseFlow); they change the views through
the named methods under "what controllers may change", or a view's own methods, never
its widgets. The menus are declared in app/actions.py. Which thread and process owns
what, and that the UI thread never waits on any of them: docs/architecture.md, "The
app's threads".
"""
from __future__ import annotations

import sys
import time

from PySide6 import QtCore, QtGui, QtWidgets

from app import actions, window_settings
from app.controllers.close_flow import CloseFlow
from app.controllers.experiment_flow import ExperimentFlow
from app.controllers.history_flow import HistoryFlow
from app.controllers.plan_flow import PlanFlow
from app.controllers.report_export import ReportExporter
from app.controllers.run_flow import RunFlow
from app.controllers.store_flow import StoreFlow
from app.controllers.what_if_flow import WhatIfFlow
from app.help_menu import HelpMenu
from app.services.forked_process import start_module
from app.services.idle_telemetry import IdleTelemetry
from app.services.ui_thread_gc import UiThreadCollector
from app.services.window_store import open_window_store
from app.settings import make_settings
from app.state import plan_state, run_rules, run_status
from app.state.device_words import sampled_text
from app.state.problem_help import Help
from app.state.live_data import (RunData, RunProgress, TelemetryHistory, compared_memory_figures, memory_figures,
                                 physical_names)
from app.views import theme
from app.views.elided_label import ElidedLabel
from app.views.error_panel import ErrorPanel
from app.views.experiment_panel import ExperimentPanel
from app.views.experiment_results import ExperimentResultsView
from app.views.history_panel import HistoryPanel
from app.views.layout import column, panel_title, scrolled, splitter, tabs
from app.views.log_view import LogView
from app.views.memory_view import MemoryView
from app.views.plan_view import PlanView
from app.views.plot_panel import PlotPanel
from app.views.run_box import RunBox
from app.views.split_view import SplitView
from app.views.torchvision_picker import LIST_ARGS
from engine import devices as devices_mod
from engine.config import ExperimentConfig
from engine.results import ExperimentResult, RunSummary, Step

# The display refresh, not the sampling rate: every 10 Hz sample is drawn either way.
# Idle, like nvitop, the view moves twice a second (each frame repaints the scrolled
# plots: ~5 ms of CPU, so 10 frames a second would cost ~5% of a core doing nothing).
IDLE_REDRAW_MS = 500
RUN_REDRAW_MS = 100      # 10 frames a second while a run goes: the telemetry's own rate
WARM_UP_LATEST_MS = 15_000   # the fork server starts by then even if Run is not clickable yet
MEMORY_REDRAW_S = 0.5    # the Memory tab's bars change rarely after the first steps


class MainWindow(QtWidgets.QMainWindow):
    sigRunStarted = QtCore.Signal(str)
    sigRunFinished = QtCore.Signal(object)          # a RunResult (engine.run.session): finished, stopped or failed
    sigChecked = QtCore.Signal(list)                # problems of the latest config (problem_help.Help); [] when valid
    sigProfiled = QtCore.Signal()
    sigHistoryShown = QtCore.Signal(list)           # run ids now on the plots
    sigExperimentFinished = QtCore.Signal(object)   # an ExperimentResult, when it ends (finished/stopped/failed)
    sigExperimentShown = QtCore.Signal(str)         # experiment id now in the result view
    sigExported = QtCore.Signal(list)               # File › Export wrote these paths
    sigExportFailed = QtCore.Signal(str)

    def __init__(self, db_path: str | None = None, telemetry_hz: float | None = None,
                 start_services: bool = True):
        super().__init__()
        self.setWindowTitle("Splitscope")
        self.setWindowIcon(QtGui.QIcon(theme.icon_path("splitscope.svg")))
        self.settings = make_settings(self)
        self.telemetry_hz = float(telemetry_hz or self.settings.value("telemetry/hz", 10.0) or 10.0)
        # Python's cyclic collector on this thread only: a Qt object in a cycle freed elsewhere aborts the process.
        self.collector = UiThreadCollector(self)
        self.store, store_notice = open_window_store(db_path)   # in the store process (docs/store.md)
        self.db_path = str(self.store.path)
        self.t0 = time.perf_counter()
        self.telemetry = TelemetryHistory(self.telemetry_hz, origin=self.t0)
        self._closed = False
        self._warmed_up = False   # the fork server asked to start (start_services)

        self.idle = IdleTelemetry(self.telemetry_hz, self)
        self.run_action, self.stop_action = actions.run_actions(self)
        self._build_ui()
        self.what_if = WhatIfFlow(self, self.plan_view, self.center_tabs, self.store, self.db_path)
        self.runs = RunFlow(self, self.idle, self.run_box)
        self.plans = PlanFlow(self, self.split_view)
        self.experiments = ExperimentFlow(self, self.runs, self.run_box)
        self.history_flow = HistoryFlow(self, self.history)
        self.closing = CloseFlow(self)
        self.exporter = ReportExporter(self, self.db_path, self.export_target)
        self.help = HelpMenu(self)
        self.store_flow = StoreFlow(self, self.error_panel, store_notice)
        self._wire()
        self.export_menu = actions.install(
            self, self.run_action, self.stop_action, list(self.exporter.actions.values()),
            {name: list(plot.export_actions.values()) for name, plot in self.plots.plots.items()},
            self.experiments.menu)
        window_settings.restore(self)

        self.redraw_timer = QtCore.QTimer(self)
        self.redraw_timer.setObjectName("redrawTimer")
        self.redraw_timer.timeout.connect(self._tick)
        self.redraw_timer.start(IDLE_REDRAW_MS)
        self.history.refresh()
        self.update_run_controls()
        if start_services:
            # After the window shows: nothing slow on the way to the first paint.
            QtCore.QTimer.singleShot(0, self.start_services)

    # -- construction -----------------------------------------------------------------
    def _build_ui(self) -> None:
        self.experiment = ExperimentPanel(len(devices_mod.usable_cores()), [])
        self.experiment.model_combo.start_torchvision_list = lambda proc: start_module(
            proc, "main", LIST_ARGS, title="torchvision's model list")
        self.split_view = SplitView()
        self.split_problem = QtWidgets.QLabel()
        self.split_problem.setObjectName("problem")
        self.split_problem.setWordWrap(True)
        self.split_problem.hide()
        settings = column(panel_title("Experiment"), self.experiment, panel_title("Split points"),
                          (self.split_view, 1), self.split_problem, margins=10, spacing=8, name="leftPanel")
        # Run, Stop and the progress stay in view below the scrolling settings.
        self.run_box = RunBox(self.run_action, self.stop_action)
        side = column((scrolled(settings), 1), self.run_box, spacing=0, name="leftPanel")
        side.setMinimumWidth(380)

        self.error_panel = ErrorPanel()
        self.plots = PlotPanel(self.telemetry)
        self._timeline_hint = self.plots.timeline.hint()   # shown when no run goes
        self.results = ExperimentResultsView()
        self.plan_view = PlanView()
        # The live (or stored) run's plots, its schedule's plan, and an experiment's result: one in view at a time.
        self.memory_view = MemoryView()
        self._memory_drawn_at = 0.0     # the live memory view is redrawn at most every MEMORY_REDRAW_S
        self.center_tabs = tabs((self.plots, "Plots"), (self.plan_view, "Plan"), (self.memory_view, "Memory"),
                                (self.results, "Experiment result"), name="centerTabs")
        self.center_tabs.currentChanged.connect(lambda _index: self._show_live_memory())
        center = column(self.error_panel, (self.center_tabs, 1), margins=(6, 8, 8, 4))
        self.history = HistoryPanel(self.store)
        self.log_view = LogView()
        self.tabs = tabs((self.history, "History"), (self.log_view, "Log"))
        self.right_split = splitter(QtCore.Qt.Orientation.Vertical, (center, 4), (self.tabs, 1))
        self.main_split = splitter(QtCore.Qt.Orientation.Horizontal, (side, 0), (self.right_split, 1))
        self.setCentralWidget(self.main_split)

        self.status_label = ElidedLabel("Ready")
        self.status_label.setObjectName("statusLine")
        self.telemetry_label = QtWidgets.QLabel("")
        self.telemetry_label.setObjectName("muted")
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addPermanentWidget(self.telemetry_label)
        self.resize(1500, 940)

    def _wire(self) -> None:
        self.experiment.sigConfigChanged.connect(self.plans.config_changed)
        self.plots.sigBackToLive.connect(self.back_to_live)
        for view in (*self.plots.plots.values(), self.results):
            view.sigExported.connect(lambda path: self.log(f"exported {path}", status=True))
            view.sigExportFailed.connect(lambda msg: self.log(msg, status=True, level="error"))
        self.idle.sigInventory.connect(self._on_inventory)
        self.idle.sigUnavailable.connect(lambda msg: self.log(msg, status=True, level="warning"))
        self.runs.sigStarted.connect(self.sigRunStarted)
        self.runs.sigFinished.connect(self.sigRunFinished)
        self.plans.sigChecked.connect(self.sigChecked)
        self.plans.sigProfiled.connect(self.sigProfiled)
        self.experiments.sigFinished.connect(self.sigExperimentFinished)
        self.history_flow.sigRunsShown.connect(self.sigHistoryShown)
        self.exporter.sigExported.connect(self.sigExported)
        self.exporter.sigExportFailed.connect(self.sigExportFailed)

    # The run box's widgets, by the names the window's tests and tools use.
    run_button = property(lambda self: self.run_box.run_button)
    stop_button = property(lambda self: self.run_box.stop_button)
    run_reason = property(lambda self: self.run_box.reason)
    progress_bar = property(lambda self: self.run_box.progress_bar)
    time_left = property(lambda self: self.run_box.time_left)
    worker = property(lambda self: self.runs.worker)
    planner = property(lambda self: self.plans.planner)

    # -- services ----------------------------------------------------------------------
    def start_services(self) -> None:
        if self._closed:
            return
        self.plans.start()
        self.idle.start()
        # The fork server imports torch too (7 s here): on two cores it would halve the planner's share, so it
        # starts once Run can be clicked (or after WARM_UP_LATEST_MS), while the user reads the window.
        self.run_action.changed.connect(lambda: self.run_action.isEnabled() and self._warm_up_once())
        QtCore.QTimer.singleShot(WARM_UP_LATEST_MS, self._warm_up_once)

    def _warm_up_once(self) -> None:
        if self._warmed_up or self._closed:
            return
        self._warmed_up = True
        self.worker.warm_up()

    def _on_inventory(self, gpus: list) -> None:
        self.plans.gpus = list(gpus)
        if gpus:
            self.experiment.set_gpus(gpus)
            self.log("GPUs: " + "; ".join(f"{devices_mod.gpu_label(g)} {g.get('name')}" for g in gpus))

    # -- user actions (app/actions.py) -------------------------------------------------
    def start_run(self) -> str | None:
        return self.runs.start()

    def stop_run(self) -> None:
        if self.experiments.is_running():
            self.experiments.stop()
        else:
            self.runs.stop()

    def back_to_live(self) -> None:
        self.history_flow.leave()
        self.plots.set_mode("live")

    def open_model_file(self) -> None:
        self.experiment.model_combo.open_model_file()

    def refresh_history(self) -> None:
        self.history.refresh()

    def show_result_view(self) -> None:
        self.center_tabs.setCurrentWidget(self.results)

    def export_target(self) -> tuple[str, str] | None:
        """What File › Export writes: what is in view (an experiment's result, a stored run), else the newest run."""
        in_view = self.results.experiment_id if self.center_tabs.currentWidget() is self.results else None
        return self.history_flow.export_target(in_view)

    # -- run controls ----------------------------------------------------------------------
    def is_busy(self) -> bool:
        """A run or an experiment is going (one at a time: they share the devices)."""
        return self.runs.is_running() or self.experiments.is_running()

    def closing_requested(self) -> bool:
        """The user asked to close: what ends now must not start the idle telemetry again."""
        return self.closing.requested

    def activity(self) -> run_rules.Activity:
        running = self.runs.is_running()
        return run_rules.Activity(run=running, experiment=self.experiments.is_running(),
                                  stopping=self.runs.stopping if running else self.experiments.stopping)

    def run_blocked_reason(self) -> str | None:
        """Why Run is disabled, or None when it is enabled (app/state/run_rules.py)."""
        return run_rules.blocked_reason(self.activity(), self.plans.state.problems, self.plans.state.check,
                                        self.plans.state.model_name)

    def update_run_controls(self) -> None:
        activity = self.activity()
        reason = self.run_blocked_reason()
        self.run_action.setEnabled(reason is None)
        self.plan_view.what_if.setEnabled(not activity.busy)
        problems = self.plans.state.check == plan_state.PROBLEMS
        if self.what_if.take_start(problems, ready=reason is None and not activity.busy):
            QtCore.QTimer.singleShot(0, self.start_run)   # a what-if row's run, as a click on Run would
        self.stop_action.setEnabled(activity.busy and not activity.stopping)
        self.experiments.menu.set_presets_enabled(not activity.busy)
        for view in (self.experiment, self.split_view):
            view.setEnabled(not activity.busy)
        self.run_box.show_reason(run_rules.ready_text(reason, self.plans.state.check),
                                 blocked=reason is not None and not activity.busy)

    def after_busy(self) -> None:
        """A run or an experiment ended: the controls come back; a close that waited for it goes on."""
        self.update_run_controls()
        if self.closing.requested:
            self.close()

    # -- what controllers may change (app/controllers/ call these, never the widgets) ---------------
    def current_config(self) -> ExperimentConfig:
        """The experiment the panel and the split view describe (may raise when its values make no config)."""
        return self.experiment.config(split=self.split_view.split())

    def panel_config(self) -> ExperimentConfig:
        """The panel's run options, the split left to the engine."""
        return self.experiment.config()

    def show_config_problems(self, problems: list[Help], split_text: str) -> None:
        """``problems`` under the panel's options; ``split_text`` (the split's) under the split view."""
        self.experiment.show_problems(problems)
        self.split_problem.setText(split_text)
        self.split_problem.setVisible(bool(split_text))

    def follow_run(self, progress: RunProgress, take_view: bool, mark: str) -> None:
        """The live plots follow ``progress``'s run from its first event; ``take_view``: they come to the front;
        ``mark``: the text of the line where it starts on the telemetry plots."""
        self.telemetry.set_physical(physical_names(progress.config))
        self.plots.begin_run(progress, show=take_view)
        self.mark_telemetry(mark)
        if take_view:
            self.plots.set_mode("live", run_status.live_title(progress))
            self.center_tabs.setCurrentWidget(self.plots)
            self.history_flow.leave()

    def current_run(self) -> RunProgress:
        """The live view's run monitor (app/state/live_data.py)."""
        return self.plots.progress

    def show_run_devices(self, devices: list[str]) -> None:
        self.plots.set_run_devices(devices)

    def show_timeline_hint(self, text: str | None) -> None:
        """The timeline's line while it has no steps: what the starting run does; None: its own hint."""
        self.plots.timeline.set_hint(text or self._timeline_hint)

    def title_live_view(self, text: str) -> None:
        self.plots.set_live_title(text)

    def plot_step(self, event: Step) -> None:
        self.plots.add_step(event)
        if time.perf_counter() - self._memory_drawn_at >= MEMORY_REDRAW_S:
            self._show_live_memory()

    def _show_live_memory(self) -> None:
        """The Memory tab from the run monitor, while it is in view: drawing it costs the cores the ranks use."""
        if self.center_tabs.currentWidget() is self.memory_view and self.plots.mode == "live":
            self._memory_drawn_at = time.perf_counter()
            self.memory_view.show_figures(*self.current_run().memory_figures())

    def mark_telemetry(self, text: str) -> None:
        """A line across the telemetry plots now (a run's start or end)."""
        self.plots.mark_run(time.perf_counter() - self.t0, text)

    def settle_plots(self) -> None:
        self.plots.redraw(force=True)
        self.plots.refresh_bubble()

    def refresh_bubble(self) -> None:
        self.plots.refresh_bubble()

    def watching_live(self) -> bool:
        """The user looks at the live plots (an experiment's later runs take the view only then)."""
        return self.center_tabs.currentWidget() is self.plots and self.plots.mode == "live"

    def show_stored_runs(self, runs: list[RunData]) -> None:
        self.plots.show_runs(runs)
        first = runs[0].summary if runs and runs[0].summary else None
        self.memory_view.show_figures(*(compared_memory_figures(runs) if runs else memory_figures(RunSummary())))
        self.show_plan(first.plan if first else None, list(first.devices) if first else [],
                       first.schedule if first else None)
        self.show_run_in_plan_tab(runs[0].run_id if runs else None, runnable=False)
        self.center_tabs.setCurrentWidget(self.plots)

    def show_plan(self, plan: list[list[str]] | None, devices: list[str], schedule: str | None) -> None:
        """The run's schedule plan: drawn in the Plan tab, and naming micro-batches in the timeline's hover."""
        self.plan_view.show_plan(plan, devices, schedule)
        self.plots.timeline.set_plan(plan, devices)

    def show_run_in_plan_tab(self, run_id: str | None, runnable: bool) -> None:
        """The Plan tab's measured step and what-if rows for a stored run (WhatIfFlow)."""
        self.what_if.show_run(run_id, runnable)

    def show_experiment_result(self, result: ExperimentResult) -> None:
        from engine.experiments import PRESETS
        preset = PRESETS.get(result.name)
        self.results.show_result(result, preset.description if preset else "")
        self.center_tabs.setCurrentWidget(self.results)
        self.sigExperimentShown.emit(result.experiment_id or "")

    def show_running_experiment(self, experiment_id: str | None) -> None:
        """The history marks this experiment as running (None: none is) and lists what is stored."""
        self.history.mark_running_experiment(experiment_id)

    def select_experiment(self, experiment_id: str) -> None:
        self.history.select_experiment(experiment_id)

    def update_progress(self) -> None:
        """The status line and progress: an experiment's counts runs, a single run's its steps."""
        if self.experiments.is_running():
            self.experiments.show_status()
        else:
            self.runs.show_progress()

    def set_redraw_busy(self, busy: bool) -> None:
        """Redraw at the telemetry's rate while work goes, slowly when idle."""
        self.redraw_timer.setInterval(RUN_REDRAW_MS if busy else IDLE_REDRAW_MS)

    def show_error(self, message: str, tb: str | None = None) -> None:
        self.error_panel.show_error(message, tb)

    def hide_error(self) -> None:
        self.error_panel.hide()

    def set_status(self, text: str) -> None:
        self.status_label.setText(text)

    def log(self, text: str, status: bool = False, level: str = "info") -> None:
        """A line in the Log ("warning" and "error" in their colours); ``status``: on the status line too."""
        self.log_view.add(text, level)
        if status:
            self.set_status(text)

    # -- the redraw tick -----------------------------------------------------------------------
    def _tick(self) -> None:
        self.telemetry.add(self.idle.drain())
        self.telemetry.add(self.runs.worker.take_samples())
        self.telemetry.add(self.experiments.client.take_samples())
        self.plots.redraw()
        if self.runs.is_running():
            self.runs.worker.check_alive()
        if self.is_busy():
            self.update_progress()
        source = "run" if self.is_busy() else ("idle" if self.idle.active else "off")
        self.telemetry_label.setText(f"telemetry {self.telemetry_hz:g} Hz · {sampled_text(self.telemetry.devices)}"
                                     f" · {source}")

    # -- closing -----------------------------------------------------------------------------------
    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802
        if self.closing.may_close():
            self.shutdown()
            event.accept()
        else:
            event.ignore()

    @property
    def closed(self) -> bool:
        return self._closed

    def shutdown(self) -> None:
        """Stop timers, the sampler and the planner; save settings. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.redraw_timer.stop()
        try:
            window_settings.save(self)
        except Exception as exc:  # a settings file that cannot be written must not keep the app open
            print(f"splitscope: could not save the settings: {exc}", file=sys.stderr)
        self.telemetry.add(self.idle.close())
        self.plans.close()
        self.what_if.close()
        if self.runs.is_running():  # only after a forced close: end the worker before we go
            self.runs.worker.wait_blocking(5.0)
        if self.experiments.is_running():
            self.experiments.client.wait_blocking(10.0)
        self.store.close()
        self.collector.stop()
