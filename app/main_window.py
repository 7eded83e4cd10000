"""MainWindow: the experiment on the left, live plots in the middle, history and log below.

The window lays out the views, makes the app's model and the controllers, and wires them.
The model (app/state/app_model.py, no Qt) holds what the app is doing and knows and names
each change in an event; the window connects its views to those events (the status line,
the Log, the history) and the controls follow them (app/controllers/run_controls.py). What a
user action sets going is a controller's (app/controllers/: RunFlow, PlanFlow, WhatIfFlow,
ExperimentFlow, HistoryFlow, RunControls, ReportExporter, CloseFlow, AdviseFlow, TraceFlow,
StoreFlow); each gets the model, the views it draws on (calling their methods, never their
widgets) and the window's port (app/main_window_port.py: the few things under "what controllers
may ask"), never the window. The menus are declared in app/actions.py. Which thread and process owns what, and that the UI thread
never waits on any of them: docs/architecture.md, "The app's threads".
"""
from __future__ import annotations

import sys
import time

from PySide6 import QtCore, QtGui, QtWidgets

from app import actions, window_settings
from app.controllers.advise_flow import AdviseFlow
from app.controllers.close_flow import CloseFlow
from app.controllers.experiment_flow import ExperimentFlow
from app.controllers.history_flow import HistoryFlow
from app.controllers.plan_flow import PlanFlow
from app.controllers.report_export import ReportExporter
from app.controllers.run_controls import RunControls
from app.controllers.run_flow import RunFlow
from app.controllers.store_flow import StoreFlow
from app.controllers.trace_flow import TraceFlow
from app.controllers.what_if_flow import WhatIfFlow
from app.help_menu import HelpMenu
from app.main_window_port import MainWindowPort
from app.services.forked_process import start_module
from app.services.idle_telemetry import IdleTelemetry
from app.services.ui_thread_gc import UiThreadCollector
from app.services.window_store import open_window_store
from app.settings import make_settings
from app.state.app_model import AppModel
from app.state.device_words import sampled_text
from app.state.live_data import TelemetryHistory
from app.state.plan_state import PENDING
from app.views import theme
from app.views.center_area import CenterArea
from app.views.elided_label import ElidedLabel
from app.views.experiment_panel import ExperimentPanel
from app.views.history_panel import HistoryPanel
from app.views.layout import column, panel_title, scrolled, splitter, tabs
from app.views.log_view import LogView
from app.views.run_box import RunBox
from app.views.split_view import SplitView
from app.views.torchvision_picker import LIST_ARGS
from app.views.watched_command import WatchedCommand
from app.views.wheel_guard import guard_wheel
from engine import devices as devices_mod
from engine.config import ExperimentConfig

# The display refresh, not the sampling rate: every 10 Hz sample is drawn either way.
# Idle, like nvitop, the view moves twice a second (each frame repaints the scrolled
# plots: ~5 ms of CPU, so 10 frames a second would cost ~5% of a core doing nothing).
IDLE_REDRAW_MS = 500
RUN_REDRAW_MS = 100      # 10 frames a second while a run goes: the telemetry's own rate
WARM_UP_LATEST_MS = 15_000   # the fork server starts by then even if Run is not clickable yet


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
        self.model = AppModel(TelemetryHistory(self.telemetry_hz, origin=self.t0), self.db_path, self.telemetry_hz)
        self.telemetry = self.model.telemetry
        self.port = MainWindowPort(self)   # what controllers may ask of the window: they never get the window
        self._closed = False
        self._warmed_up = False   # the fork server asked to start (start_services)

        self.idle = IdleTelemetry(self.telemetry_hz, self)
        self.run_action, self.stop_action, self.watch_action = actions.run_actions(self)
        self.advise_action = actions.advise_action(self)
        self._build_ui()
        self._follow_model()
        model, port = self.model, self.port
        self.what_if = WhatIfFlow(model, port, self.plan_view, self.center_tabs, self.store, parent=self)
        self.runs = RunFlow(model, port, self.idle, self.run_box, self.center, self.what_if, parent=self)
        self.plans = PlanFlow(model, port, self.split_view, self.experiment, self.center, parent=self)
        self.experiments = ExperimentFlow(model, port, self.runs, self.run_box, self.center, self.history,
                                          parent=self)
        self.history_flow = HistoryFlow(model, self.history, self.center, parent=self)
        # File › Open traces…: a job's profiler traces as a run
        self.traces = TraceFlow(model, port, self.history, self.settings, parent=self)
        self.closing = CloseFlow(model, port, parent=self)
        self.advise = AdviseFlow(model, port, self.advise_action, self.run_box, self.center_tabs, parent=self)
        self.controls = RunControls(
            model, dict(run=self.run_action, stop=self.stop_action, watch=self.watch_action, panel=self.experiment,
                        split=self.split_view, what_if_rows=self.plan_view.what_if, run_box=self.run_box,
                        presets=self.experiments.menu), parent=self)
        self.exporter = ReportExporter(model, port, self.export_target, parent=self)
        self.help = HelpMenu(self)
        self.store_flow = StoreFlow(model, self.center.error_panel, store_notice, parent=self)
        self._wire()
        self.export_menu = actions.install(
            self, self.run_action, self.stop_action, self.watch_action, list(self.exporter.actions.values()),
            {name: list(plot.export_actions.values()) for name, plot in self.plots.plots.items()},
            self.experiments.menu, advise=self.advise_action)
        window_settings.restore(self)

        self.redraw_timer = QtCore.QTimer(self)
        self.redraw_timer.setObjectName("redrawTimer")
        self.redraw_timer.timeout.connect(self._tick)
        self.redraw_timer.start(IDLE_REDRAW_MS)
        self.history.refresh()
        self.model.end()   # nothing goes yet: the controls and Advise say why Run waits
        if start_services:
            # After the window shows: nothing slow on the way to the first paint.
            QtCore.QTimer.singleShot(0, self.start_services)

    # -- construction -----------------------------------------------------------------
    def _build_ui(self) -> None:
        self.experiment = ExperimentPanel(len(devices_mod.usable_cores()), [])
        self.experiment.model_combo.start_torchvision_list = lambda proc: start_module(
            proc, "main", LIST_ARGS, title="torchvision's model list")
        self.split_view = SplitView()
        self.watched = WatchedCommand()   # in the form's place while a watched script runs
        self.split_title = panel_title("Split points")
        settings = column(panel_title("Experiment"), self.watched, self.experiment, self.split_title,
                          (self.split_view, 1), margins=10, spacing=8, name="leftPanel")
        # Run, Stop and the progress stay in view below the scrolling settings.
        self.run_box = RunBox(self.run_action, self.stop_action)
        side = column((scrolled(settings), 1), self.run_box, spacing=0, name="leftPanel")
        guard_wheel(side)   # the wheel scrolls the form; a box changes only once clicked (app/views/wheel_guard.py)
        side.setMinimumWidth(380)

        self.center = CenterArea(self.telemetry)
        self.plots, self.plan_view, self.center_tabs = self.center.plots, self.center.plan_view, self.center.tabs
        self.history = HistoryPanel(self.store)
        self.log_view = LogView()
        self.tabs = tabs((self.history, "History"), (self.log_view, "Log"))
        self.right_split = splitter(QtCore.Qt.Orientation.Vertical, (self.center, 4), (self.tabs, 1))
        self.main_split = splitter(QtCore.Qt.Orientation.Horizontal, (side, 0), (self.right_split, 1))
        self.setCentralWidget(self.main_split)

        self.status_label = ElidedLabel("Ready")
        self.status_label.setObjectName("statusLine")
        self.telemetry_label = QtWidgets.QLabel("")
        self.telemetry_label.setObjectName("muted")
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addPermanentWidget(self.telemetry_label)
        # Its first size (later launches restore the last, app/window_settings.py), within the screen: on a
        # 1280x800 one the window opened 1500x940, its right and bottom edges off screen.
        size, screen = QtCore.QSize(1500, 940), self.screen() or QtGui.QGuiApplication.primaryScreen()
        self.resize(size.boundedTo(screen.availableGeometry().size() * 0.95) if screen is not None else size)

    def _follow_model(self) -> None:
        """The views that show a part of the app's model follow its event (app/state/app_model.py)."""
        events = self.model.events
        events.status.connect(self.status_label.setText)
        events.logged.connect(self.log_view.add)
        events.stored.connect(self.history.refresh)
        events.experiment.connect(self.history.mark_running_experiment)

    def _wire(self) -> None:
        self.experiment.sigConfigChanged.connect(self.plans.config_changed)
        self.plots.sigBackToLive.connect(self.back_to_live)
        self.center.sigLiveViewTaken.connect(self.history_flow.leave)
        self.center.sigExperimentShown.connect(self.sigExperimentShown)
        for view in (*self.plots.plots.values(), self.center.results):
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
        # A stored run's measured step and what-if rows in the Plan tab (a stored run is not run from there).
        self.history_flow.sigRunsShown.connect(lambda run_ids: self.what_if.show_run(run_ids[0], runnable=False))
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
        # starts once the first check is in (or at a click on Run, or after WARM_UP_LATEST_MS).
        self.model.events.plan.connect(lambda plan: plan.check != PENDING and self._warm_up_once())
        QtCore.QTimer.singleShot(WARM_UP_LATEST_MS, self._warm_up_once)

    def _warm_up_once(self) -> None:
        if self._warmed_up or self._closed:
            return
        self._warmed_up = True
        self.worker.warm_up()

    def _on_inventory(self, gpus: list) -> None:
        self.model.gpus = list(gpus)
        if gpus:
            self.experiment.set_gpus(gpus)
            self.log("GPUs: " + "; ".join(f"{devices_mod.gpu_label(g)} {g.name or 'GPU'}" for g in gpus))

    # -- user actions (app/actions.py) -------------------------------------------------
    def start_run(self) -> str | None:
        return self.runs.start()

    def stop_run(self) -> None:
        if self.advise.is_running():
            self.advise.stop()
        elif self.experiments.is_running():
            self.experiments.stop()
        else:
            self.runs.stop()

    def back_to_live(self) -> None:
        self.history_flow.leave()
        self.plots.set_mode("live")

    def export_target(self) -> tuple[str, str] | None:
        """What File › Export writes: what is in view (an experiment's result, a stored run), else the newest run."""
        return self.history_flow.export_target(self.center.experiment_in_view())

    # -- what controllers may ask (through app/main_window_port.py; tests and tools call them too) -------
    def current_config(self) -> ExperimentConfig:
        """The experiment the panel and the split view describe (may raise when its values make no config)."""
        return self.experiment.config(split=self.split_view.split())

    def panel_config(self) -> ExperimentConfig:
        """The panel's run options, the split left to the engine."""
        return self.experiment.config()

    def update_progress(self) -> None:
        """The status line and progress: an experiment's counts runs, a single run's its steps."""
        if self.experiments.is_running():
            self.experiments.show_status()
        else:
            self.runs.show_progress()

    def show_watched_command(self, config: ExperimentConfig | None) -> None:
        """A watched script's command in the form's place while it runs (None: the form again)."""
        self.watched.show_command(config)
        for view in (self.experiment, self.split_title, self.split_view):
            view.setVisible(config is None)

    def set_redraw_busy(self, busy: bool) -> None:
        """Redraw at the telemetry's rate while work goes, slowly when idle."""
        self.redraw_timer.setInterval(RUN_REDRAW_MS if busy else IDLE_REDRAW_MS)

    def set_status(self, text: str) -> None:
        self.model.set_status(text)

    def log(self, text: str, status: bool = False, level: str = "info") -> None:
        """A line in the Log ("warning" and "error" in their colours); ``status``: on the status line too."""
        self.model.log(text, status=status, level=level)

    # -- the redraw tick -----------------------------------------------------------------------
    def _tick(self) -> None:
        self.telemetry.add(self.idle.drain())
        self.telemetry.add(self.runs.worker.take_samples())
        self.telemetry.add(self.experiments.client.take_samples())
        self.plots.redraw()
        if self.runs.is_running():
            self.runs.worker.check_alive()
        if self.model.is_busy():
            self.update_progress()
        source = "run" if self.model.is_busy() else ("idle" if self.idle.active else "off")
        text = f"telemetry {self.telemetry_hz:g} Hz · {sampled_text(self.telemetry.devices)} · {source}"
        if text != self.telemetry_label.text():   # ten times a second: the status bar repaints only on a change
            self.telemetry_label.setText(text)

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
        self.traces.close()
        self.advise.close()   # its checking run stopped in order, else killed
        if self.runs.is_running():  # only after a forced close: end the worker before we go
            self.runs.worker.wait_blocking(5.0)
        if self.experiments.is_running():
            self.experiments.client.wait_blocking(10.0)
        self.store.close()
        self.collector.stop()
