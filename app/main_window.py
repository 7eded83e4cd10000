"""MainWindow: the experiment on the left, live plots in the middle, history and log below.

Threads and processes, and who owns what:

- UI thread: every widget, the ring buffers, the run store connection for the
  history list. One QTimer (``redraw_timer``) drains telemetry and redraws.
- telemetry-sampler thread (engine): the idle view's samples when no run is on.
- RunSession's threads (engine): worker events and run telemetry, handed over
  by WorkerClient through a lock and one queued signal.
- planner process (app.services.planner_service): validation and block profiling, which
  import torch; answers arrive through QProcess signals.
- history-loader threads: read stored runs with their own store connection.
- experiment-<name> thread (app.services.experiment_client): ExperimentRunner.run(), one
  run after another; its callbacks come over like WorkerClient's.
- report-export threads (app.controllers.report_export): File › Export, own store connection.
The UI thread never waits on any of them while the window is open.
"""
from __future__ import annotations

import os
import threading
import time
import traceback
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app.controllers.experiment_flow import ExperimentFlow
from app.controllers.report_export import ReportExporter
from app.services.planner_client import PlannerClient
from app.settings import make_settings, read_int, read_str
from app.services.worker_client import WorkerClient
from app.state import run_rules
from app.state.live_data import RunProgress, TelemetryHistory, physical_names
from app.state.units import format_duration
from app.views import theme
from app.views.elided_label import ElidedLabel
from app.views.error_panel import ErrorPanel
from app.views.experiment_panel import ExperimentPanel
from app.views.experiment_results import ExperimentResultsView
from app.views.history_panel import HistoryPanel
from app.views.plot_panel import PlotPanel
from app.views.split_view import SplitView
from engine import config as config_mod
from engine import devices as devices_mod
from engine import planning
from engine.config import ExperimentConfig
from engine.store import Store
from engine.models import MODELS
from engine.strategies import STRATEGIES

# The display refresh, not the sampling rate: every 10 Hz sample is drawn either way.
# Idle, like nvitop, the view moves twice a second (each frame repaints the scrolled
# plots: ~5 ms of CPU, so 10 frames a second would cost ~5% of a core doing nothing).
IDLE_REDRAW_MS = 500
RUN_REDRAW_MS = 100      # 10 frames a second while a run goes: the telemetry's own rate
CLOSE_STOP_TIMEOUT_MS = 10_000


class MainWindow(QtWidgets.QMainWindow):
    sigRunStarted = QtCore.Signal(str)
    sigRunFinished = QtCore.Signal(dict)
    sigChecked = QtCore.Signal(list)          # problems of the latest config (dicts); [] when valid
    sigProfiled = QtCore.Signal()
    sigHistoryShown = QtCore.Signal(list)     # run ids now on the plots
    sigExperimentFinished = QtCore.Signal(dict)   # an experiment's result, when it ends (finished/stopped/failed)
    sigExperimentShown = QtCore.Signal(str)   # experiment id now in the result view
    sigExported = QtCore.Signal(list)         # File › Export wrote these paths
    sigExportFailed = QtCore.Signal(str)
    _sigInventory = QtCore.Signal(list)

    def __init__(self, db_path: str | None = None, telemetry_hz: float | None = None,
                 start_services: bool = True):
        super().__init__()
        self.setWindowTitle("Splitscope")
        self.setWindowIcon(QtGui.QIcon(theme.icon_path("splitscope.svg")))
        self.settings = make_settings(self)
        self.telemetry_hz = float(telemetry_hz or self.settings.value("telemetry/hz", 10.0) or 10.0)
        self.store = Store(db_path)
        self.db_path = str(self.store.path)
        self.t0 = time.perf_counter()
        self.telemetry = TelemetryHistory(self.telemetry_hz, origin=self.t0)
        self.cores = len(devices_mod.usable_cores())
        self.gpus: list[dict] = []
        self._idle_sampler = None
        self._sampler_lock = threading.Lock()
        self._sampler_generation = 0
        self._closing = False
        self._closed = False
        self._close_requested = False
        self._check_state = "pending"        # pending, ok, problems, unavailable
        self._problems: list[dict] = []
        self._profile_cache: dict[tuple, dict] = {}  # {"blocks", "costs_by_kind"} per model and device kinds
        self._profile_key: tuple | None = None
        self._profile_pending = False
        self._run_started_at: float | None = None
        self._shown_runs: list[str] = []

        self.worker = WorkerClient(db_path=self.db_path, telemetry_hz=self.telemetry_hz, parent=self)
        self.worker.sigEvents.connect(self._on_events)
        self.worker.sigFinished.connect(self._on_finished)
        self.worker.sigFailed.connect(self._on_failed)
        self.worker.sigKilled.connect(lambda msg: self.log(msg, status=True, level="error"))
        self.experiments = ExperimentFlow(self)
        self.experiments.sigFinished.connect(self.sigExperimentFinished)
        self.exporter = ReportExporter(self, self.db_path, self.export_target)
        self.exporter.sigExported.connect(self._on_exported)
        self.exporter.sigExportFailed.connect(self._on_export_failed)
        self.planner = PlannerClient(self)
        self.planner.sigChecked.connect(self._on_checked)
        self.planner.sigProfiled.connect(self._on_profiled)
        self.planner.sigCrashed.connect(self._on_planner_crashed)
        self.planner.sigReady.connect(lambda: self.log("planner ready (validation and block profiling)"))
        self._sigInventory.connect(self._on_inventory)

        self._build_ui()
        self._build_actions()
        self.restore_settings()

        self.redraw_timer = QtCore.QTimer(self)
        self.redraw_timer.setObjectName("redrawTimer")
        self.redraw_timer.timeout.connect(self._tick)
        self.redraw_timer.start(IDLE_REDRAW_MS)
        self.history.refresh()
        self._update_run_controls()
        if start_services:
            # After the window shows: nothing slow on the way to the first paint.
            QtCore.QTimer.singleShot(0, self.start_services)

    # -- construction -----------------------------------------------------------------
    def _build_ui(self) -> None:
        self.experiment = ExperimentPanel(self.cores, [])
        self.experiment.sigConfigChanged.connect(self._on_config_changed)
        self.split_view = SplitView()
        self.split_view.sigSplitChanged.connect(self._on_split_changed)
        self.split_problem = QtWidgets.QLabel()
        self.split_problem.setObjectName("problem")
        self.split_problem.setWordWrap(True)
        self.split_problem.hide()

        self.run_action = QtGui.QAction(self.style().standardIcon(QtWidgets.QStyle.StandardPixmap.SP_MediaPlay),
                                        "Run", self)
        self.stop_action = QtGui.QAction(self.style().standardIcon(QtWidgets.QStyle.StandardPixmap.SP_MediaStop),
                                         "Stop", self)
        self.run_button = QtWidgets.QToolButton()
        self.run_button.setObjectName("runButton")
        self.run_button.setDefaultAction(self.run_action)
        self.run_button.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.stop_button = QtWidgets.QToolButton()
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setDefaultAction(self.stop_action)
        self.stop_button.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.run_reason = QtWidgets.QLabel()
        self.run_reason.setObjectName("runReason")
        self.run_reason.setWordWrap(True)
        self.progress_bar = QtWidgets.QProgressBar()
        self.progress_bar.setObjectName("progressBar")
        self.progress_bar.setFormat("no run yet")
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.time_left = QtWidgets.QLabel("")
        self.time_left.setObjectName("muted")

        left = QtWidgets.QWidget()
        left.setObjectName("leftPanel")
        lv = QtWidgets.QVBoxLayout(left)
        lv.setContentsMargins(10, 10, 10, 10)
        lv.setSpacing(8)
        title = QtWidgets.QLabel("Experiment")
        title.setObjectName("panelTitle")
        lv.addWidget(title)
        lv.addWidget(self.experiment)
        split_title = QtWidgets.QLabel("Split points")
        split_title.setObjectName("panelTitle")
        lv.addWidget(split_title)
        lv.addWidget(self.split_view, 1)
        lv.addWidget(self.split_problem)
        scroll = QtWidgets.QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(left)
        scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        # Run, Stop and the progress stay in view below the scrolling settings.
        run_box = QtWidgets.QFrame()
        run_box.setObjectName("runBox")
        rv = QtWidgets.QVBoxLayout(run_box)
        rv.setContentsMargins(10, 8, 10, 10)
        rv.setSpacing(6)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addWidget(self.run_button, 1)
        buttons.addWidget(self.stop_button, 1)
        rv.addLayout(buttons)
        rv.addWidget(self.run_reason)
        prog = QtWidgets.QHBoxLayout()
        prog.addWidget(self.progress_bar, 1)
        prog.addWidget(self.time_left)
        rv.addLayout(prog)
        side = QtWidgets.QWidget()
        side.setObjectName("leftPanel")
        sv = QtWidgets.QVBoxLayout(side)
        sv.setContentsMargins(0, 0, 0, 0)
        sv.setSpacing(0)
        sv.addWidget(scroll, 1)
        sv.addWidget(run_box)
        side.setMinimumWidth(380)

        self.error_panel = ErrorPanel()
        self.plots = PlotPanel(self.telemetry)
        self.plots.sigBackToLive.connect(self.back_to_live)
        for widget in self.plots.plots.values():
            widget.sigExported.connect(lambda path: self.log(f"exported {path}", status=True))
            widget.sigExportFailed.connect(lambda msg: self.log(msg, status=True, level="error"))
        self.results = ExperimentResultsView()
        self.results.sigExported.connect(lambda path: self.log(f"exported {path}", status=True))
        self.results.sigExportFailed.connect(lambda msg: self.log(msg, status=True, level="error"))
        # The live (or stored) run's plots, and an experiment's result: one in view at a time.
        self.center_tabs = QtWidgets.QTabWidget()
        self.center_tabs.setObjectName("centerTabs")
        self.center_tabs.addTab(self.plots, "Plots")
        self.center_tabs.addTab(self.results, "Experiment result")
        center = QtWidgets.QWidget()
        cv = QtWidgets.QVBoxLayout(center)
        cv.setContentsMargins(6, 8, 8, 4)
        cv.addWidget(self.error_panel)
        cv.addWidget(self.center_tabs, 1)

        self.history = HistoryPanel(self.store)
        self.history.sigSelectionChanged.connect(self._on_history_selection)
        self.history.sigLoaded.connect(self._on_history_loaded)
        self.history.sigExperimentSelected.connect(self._on_experiment_selected)
        self.log_view = QtWidgets.QPlainTextEdit()
        self.log_view.setObjectName("logView")
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(5000)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.addTab(self.history, "History")
        self.tabs.addTab(self.log_view, "Log")

        self.right_split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.right_split.addWidget(center)
        self.right_split.addWidget(self.tabs)
        self.right_split.setStretchFactor(0, 4)
        self.right_split.setStretchFactor(1, 1)
        self.main_split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.main_split.addWidget(side)
        self.main_split.addWidget(self.right_split)
        self.main_split.setStretchFactor(0, 0)
        self.main_split.setStretchFactor(1, 1)
        self.setCentralWidget(self.main_split)

        self.status_label = ElidedLabel("Ready")
        self.status_label.setObjectName("statusLine")
        self.telemetry_label = QtWidgets.QLabel("")
        self.telemetry_label.setObjectName("muted")
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addPermanentWidget(self.telemetry_label)
        self.resize(1500, 940)

    def _build_actions(self) -> None:
        self.run_action.setShortcut(QtGui.QKeySequence("Ctrl+R"))
        self.run_action.setToolTip("Run the experiment (Ctrl+R)")
        self.run_action.triggered.connect(self.start_run)
        self.stop_action.setShortcut(QtGui.QKeySequence(QtCore.Qt.Key.Key_Escape))
        self.stop_action.setToolTip("Stop the run (Esc)")
        self.stop_action.triggered.connect(self.stop_run)
        for action in (self.run_action, self.stop_action):
            action.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
            self.addAction(action)
        file_menu = self.menuBar().addMenu("&File")
        open_model = file_menu.addAction("Open model file…")
        open_model.triggered.connect(self._open_model_file)
        file_menu.addSeparator()
        # Export: the selected run or experiment through engine.export, or one plot as it is drawn.
        self.export_menu = file_menu.addMenu("&Export")
        self.export_menu.setToolTipsVisible(True)
        for action in self.exporter.actions.values():
            self.export_menu.addAction(action)
        self.export_menu.addSeparator()
        for name, widget in self.plots.plots.items():
            sub = self.export_menu.addMenu(f"Plot: {name}")
            for action in widget.export_actions.values():
                sub.addAction(action)
        file_menu.addSeparator()
        self.quit_action = file_menu.addAction("Quit")
        self.quit_action.setShortcut(QtGui.QKeySequence("Ctrl+Q"))
        self.quit_action.triggered.connect(self.close)
        menu = self.menuBar().addMenu("&Run")
        menu.addAction(self.run_action)
        menu.addAction(self.stop_action)
        self.menuBar().addMenu(self.experiments.menu)
        view = self.menuBar().addMenu("&View")
        live = view.addAction("Back to live")
        live.triggered.connect(self.back_to_live)
        refresh = view.addAction("Refresh history")
        refresh.setShortcut(QtGui.QKeySequence("F5"))
        refresh.triggered.connect(self.history.refresh)
        results = view.addAction("Experiment result")
        results.triggered.connect(lambda: self.center_tabs.setCurrentWidget(self.results))

    def _open_model_file(self) -> None:
        combo = self.experiment.model_combo
        index = combo.findData("__open_model_file__")
        combo.setCurrentIndex(index)
        combo.activated.emit(index)

    def quit_without_asking(self) -> None:
        """Close now; a run in progress is stopped first (timers and scripts use this, not users)."""
        if self.is_busy():
            self._close_requested = True
            self.stop_run()
            QtCore.QTimer.singleShot(CLOSE_STOP_TIMEOUT_MS, self._force_close)
        else:
            self.close()

    # -- services: telemetry, planner, GPU inventory ----------------------------------------
    def start_services(self) -> None:
        if self._closing:
            return
        self.planner.start()
        self._start_idle_sampler()
        self._on_config_changed()

    def _start_idle_sampler(self) -> None:
        """The nvitop-like view: every GPU and core, sampled while no run is on.

        Listing targets initializes NVML, which can take a while on a GPU machine:
        it happens on a helper thread, which also reads the GPU inventory.
        """
        self._sampler_generation += 1
        generation = self._sampler_generation

        def work():
            try:
                from engine.telemetry import TelemetrySampler, all_targets
                from engine.telemetry import gpu_inventory
                sampler = TelemetrySampler(all_targets(), rate_hz=self.telemetry_hz,
                                           on_warning=lambda msg: None)
                gpus = gpu_inventory.inventory() if not self.gpus else None
            except Exception as exc:  # no telemetry is a message, not a crash
                self._inventory_error = f"telemetry unavailable: {type(exc).__name__}: {exc}"
                return
            with self._sampler_lock:
                if generation != self._sampler_generation or self._closing:
                    return  # a run started (or the window closed) meanwhile
                sampler.start()
                self._idle_sampler = sampler
            if gpus is not None:
                try:
                    self._sigInventory.emit(gpus)
                except RuntimeError:
                    pass

        threading.Thread(target=work, name="telemetry-start", daemon=True).start()

    def _stop_idle_sampler(self) -> None:
        with self._sampler_lock:
            self._sampler_generation += 1
            sampler, self._idle_sampler = self._idle_sampler, None
        if sampler is not None:
            # The thread sleeps between passes; it ends within one pass (a few ms).
            sampler.stop(timeout=0.2)
            self.telemetry.add(sampler.drain())

    def _on_inventory(self, gpus: list) -> None:
        self.gpus = list(gpus)
        if gpus:
            self.experiment.set_gpus(self.gpus)
            self.log("GPUs: " + "; ".join(f"{devices_mod.gpu_label(g)} {g.get('name')}" for g in gpus))

    # -- the config and its validation ---------------------------------------------------
    def current_config(self) -> ExperimentConfig:
        return self.experiment.config(split=self.split_view.split())

    def _stages_for(self, config: ExperimentConfig) -> int | None:
        try:
            from engine.validate import devices_needed  # torch-free at import
            usable_gpus = len(devices_mod.cuda_visible(self.gpus))  # what torch numbers cuda:0..
            return len(devices_mod.parse(config.devices, devices_needed(config), gpus=usable_gpus))
        except devices_mod.DeviceError:
            return None

    def _profile_key_for(self, config: ExperimentConfig) -> tuple:
        mtime = None
        if config.model_file:
            try:
                mtime = os.path.getmtime(config.model_file)
            except OSError:
                mtime = None
        return (config.model, config.model_file, mtime, config.width if config.model == "mlp" else None,
                config.depth if config.model == "mlp" else None, config.effective_batch_size,
                tuple(sorted({d.kind for d in self._devices_of(config)})))

    def _devices_of(self, config: ExperimentConfig) -> list:
        """The config's devices (torch-free), or none while the spec is wrong (the check says why)."""
        from engine.validate import devices_needed
        try:
            return devices_mod.parse(config.devices, devices_needed(config))
        except devices_mod.DeviceError:
            return []

    def _micro_batch_size(self, config: ExperimentConfig) -> float:
        m = config.effective_micro_batches
        return config.effective_batch_size / max(1, m)

    def _on_config_changed(self) -> None:
        config = self.experiment.config(split=None)
        info = STRATEGIES.get(config.strategy)
        stages = self._stages_for(config) or 2
        self.split_view.set_context(bool(info and info.uses_split), stages, self._micro_batch_size(config))
        model = MODELS.get(config.model) if not config.model_file else None
        self.split_view.set_tutorial_split(model.tutorial_split if model else None)
        key = self._profile_key_for(config)
        profiled = self._profile_cache.get(key)
        if key != self._profile_key:
            self._profile_key = key
            if profiled is not None:
                self._apply_blocks(profiled, keep_choice=False)
            else:
                self.split_view.clear_blocks("Profiling the model's blocks…")
        elif profiled is not None and self.split_view.blocks:
            # The stages' devices may have changed: the balanced split follows; a split the user chose stays.
            view = self.split_view
            self._apply_blocks(profiled, keep_choice=view.balanced is not None and view.split() != view.balanced)
        self._request_check()
        self._preview_bubble()

    def _preview_bubble(self) -> None:
        """Before the first run, the bubble box shows the theory for the configured experiment."""
        p = self.plots.progress
        if p.run_id is not None or self.worker.is_running():
            return
        config = self.current_config()
        stages = self._stages_for(config) or 0
        p.config = config.to_dict()
        p.devices = []
        p.split = list(config.split) if config.split else ([0] * (stages - 1) if stages > 1 else None)
        p.micro_batches = config.effective_micro_batches
        p.theory, p.notes = None, []
        devices = self._devices_of(config)
        if config.strategy in STRATEGIES and devices:
            from engine.summary import theoretical_bubble, why_no_theory
            names = [d.name for d in devices]
            own = STRATEGIES[config.strategy].world_size(config, devices) > 1
            p.theory = theoretical_bubble(config.strategy, names, p.micro_batches, own)
            p.notes = [n for n in [why_no_theory(config.strategy, names, p.micro_batches, own)] if n]
        self.plots.refresh_bubble()

    def _on_split_changed(self) -> None:
        self._request_check()

    def _apply_blocks(self, profiled: dict, keep_choice: bool) -> None:
        """The planner's blocks in the split view, with the balanced split for the configured stage devices:
        each stage's blocks costed on its own kind of device (engine.planning.balanced_for_kinds)."""
        blocks = profiled["blocks"]
        stages = self.split_view.stages
        balanced = None
        if self.split_view.uses_split and 2 <= stages <= len(blocks):
            kinds = [d.kind for d in self._devices_of(self.experiment.config(split=None))]
            costs = profiled.get("costs_by_kind") or {"cpu": [b["cost_s"] for b in blocks]}
            if len(kinds) != stages:  # devices not settled yet: the first kind for every stage
                kinds = [next(iter(costs))] * stages
            balanced = list(planning.balanced_for_kinds(costs, kinds))
        self.split_view.blockSignals(True)
        try:
            self.split_view.set_blocks(blocks, balanced, keep_choice=keep_choice)
        finally:
            self.split_view.blockSignals(False)

    def _request_check(self) -> None:
        config = self.current_config()
        quick = [{"option": p.option, "message": p.message} for p in config_mod.problems(config)]
        self._problems = quick
        self.experiment.show_problems(quick)
        self._show_split_problems(quick)
        need_profile = self._profile_key not in self._profile_cache
        self._profile_pending = need_profile
        self._check_state = "pending"
        if self.planner.ready or self.planner._proc is not None:
            self.planner.request(config.to_dict(), profile=need_profile, stages=self.split_view.stages)
        else:
            self._check_state = "unavailable"
        self._update_run_controls()

    def _show_split_problems(self, problems: list[dict]) -> None:
        texts = [f"--split: {p['message']}" for p in problems if p["option"] == "split"]
        self.split_problem.setText("\n".join(texts))
        self.split_problem.setVisible(bool(texts))

    def _on_checked(self, _req_id: int, msg: dict) -> None:
        problems = list(msg.get("problems") or [])
        self._problems = problems
        shown = [p for p in problems if p["option"] != "split"]
        self.experiment.show_problems(shown)
        self._show_split_problems(problems)
        self._check_state = "problems" if problems else "ok"
        for warning in msg.get("warnings") or []:
            self.log(f"warning: {warning}")
        self._update_run_controls()
        self.sigChecked.emit(problems)

    def _on_profiled(self, _req_id: int, msg: dict) -> None:
        self._profile_pending = False
        blocks = msg.get("blocks")
        if not blocks:
            error = msg.get("error") or "no blocks"
            self.split_view.clear_blocks(f"Could not profile the blocks: {error}")
            self.log(f"block profiling failed: {error}")
            self.sigProfiled.emit()
            return
        profiled = {"blocks": blocks, "costs_by_kind": msg.get("costs_by_kind")}
        self._profile_cache[self._profile_key] = profiled
        self._apply_blocks(profiled, keep_choice=False)
        self.sigProfiled.emit()
        # The split view now holds an explicit split (the balanced one): check that config.
        self._request_check()

    def _on_planner_crashed(self, message: str) -> None:
        self.log(message, level="error")
        self._check_state = "unavailable"
        self._update_run_controls()

    # -- run controls ----------------------------------------------------------------------
    def is_busy(self) -> bool:
        """A run or an experiment is going (one at a time: they share the devices)."""
        return self.worker.is_running() or self.experiments.is_running()

    def activity(self) -> run_rules.Activity:
        running = self.worker.is_running()
        return run_rules.Activity(run=running, experiment=self.experiments.is_running(),
                                  stopping=self.worker.stopping if running else self.experiments.stopping)

    def run_blocked_reason(self) -> str | None:
        """Why Run is disabled, or None when it is enabled (app/run_rules.py)."""
        return run_rules.blocked_reason(self.activity(), self._problems, self._check_state)

    def update_run_controls(self) -> None:
        self._update_run_controls()

    def _update_run_controls(self) -> None:
        activity = self.activity()
        reason = run_rules.blocked_reason(activity, self._problems, self._check_state)
        running = activity.busy
        self.run_action.setEnabled(reason is None)
        self.stop_action.setEnabled(running and not activity.stopping)
        self.experiments.menu.set_presets_enabled(not running)
        self.experiment.setEnabled(not running)
        self.split_view.setEnabled(not running)
        self.run_reason.setText(run_rules.ready_text(reason, self._check_state))
        self.run_reason.setProperty("blocked", reason is not None and not running)
        self.run_reason.style().unpolish(self.run_reason)
        self.run_reason.style().polish(self.run_reason)

    def start_run(self) -> str | None:
        if self.run_blocked_reason() is not None:
            return None
        config = self.current_config()
        self.error_panel.hide()
        self._stop_idle_sampler()
        try:
            run_id = self.worker.start(config)
        except Exception as exc:
            self.error_panel.show_error(f"Could not start the run: {type(exc).__name__}: {exc}",
                                        traceback.format_exc())
            self.log(f"could not start the run: {exc}", level="error")
            self._start_idle_sampler()
            self._update_run_controls()
            return None
        self.begin_live_run(run_id, config, f"run {run_label_short(run_id)}")
        self.show_progress(0, config.steps, "step %v / %m")
        self.show_time_left("")
        self.set_redraw_busy(True)
        self.set_status(f"Starting {config.strategy} on {config.devices}: worker launching…")
        self.log(f"run {run_id}: {config.to_json()}")
        self._update_run_controls()
        self.sigRunStarted.emit(run_id)
        return run_id

    def begin_live_run(self, run_id: str | None, run_config: ExperimentConfig, label: str,
                       take_view: bool = True) -> None:
        """A run starts (alone or as part of an experiment): the live plots follow it from its first event.

        ``take_view`` brings the live plots to the front; an experiment's later runs leave
        a stored run or a result the user turned to where it is.
        """
        self._run_started_at = time.perf_counter()
        config = run_config.to_dict()
        progress = RunProgress(run_id=run_id, config=config, steps_total=run_config.steps,
                               micro_batches=run_config.effective_micro_batches,
                               split=list(config["split"]) if config.get("split") else None, status="starting",
                               label=label)
        self.telemetry.set_physical(physical_names(config))
        self.plots.begin_run(progress, show=take_view)
        self.plots.mark_run(self._run_started_at - self.t0, label.split(",")[0])
        if not take_view:
            return
        self.plots.set_mode("live", f"Live: {label}, {config.get('strategy')} on {config.get('devices')}")
        self.center_tabs.setCurrentWidget(self.plots)
        self.history.table.blockSignals(True)
        self.history.table.clearSelection()
        self.history.table.blockSignals(False)
        self._shown_runs = []

    def stop_run(self) -> None:
        if self.experiments.is_running():
            self.experiments.stop()
            return
        if not self.worker.is_running() or self.worker.stopping:
            return
        self.worker.stop()
        self.set_status("Stopping the run… (the worker ends within 3 s)")
        self.log("stop requested")
        self._update_run_controls()

    # -- run events (UI thread, batched) -------------------------------------------------------
    def on_run_events(self, events: list) -> None:
        self._on_events(events)

    def _on_events(self, events: list) -> None:
        p = self.plots.progress
        for event in events:
            p.apply(event)
            kind = event.get("type")
            if kind == "started":
                self.plots.timeline.set_devices(p.devices)
                if self.plots.mode == "live":
                    label = getattr(p, "label", None) or f"run {run_label_short(p.run_id or '')}"
                    self.plots.mode_label.setText(f"Live: {label}, "
                                                  f"{p.config.get('strategy')} on {', '.join(p.devices)}")
                split = f", split at {','.join(map(str, p.split))}" if p.split else ""
                if not self.experiments.is_running():
                    self.set_status(f"Running {p.config.get('strategy')} on {', '.join(p.devices)}{split}")
                self.log(f"started: devices {', '.join(p.devices)}{split}, pids {event.get('pids')}")
            elif kind == "step":
                self.plots.steps.add(event)
            elif kind in ("log", "warning"):
                self.log(f"{kind}: {event.get('message')}", level="warning" if kind == "warning" else "info")
            elif kind == "error":
                self.log(f"error (rank {event.get('rank')}): {event.get('message')}", level="error")
            elif kind == "finished":
                self.telemetry.end_run()
        self._update_progress()

    def _update_progress(self) -> None:
        p = self.plots.progress
        if self.experiments.is_running():  # the bar counts runs; the status line the current run's steps
            text = self.experiments.status_text()
            if text:
                self.set_status(text)
            return
        self.progress_bar.setValue(min(p.steps_done, p.steps_total))
        left = p.time_left_s()
        if p.status in ("running", "starting") and left is not None and p.steps_done:
            self.time_left.setText(f"≈ {format_duration(left)} left")
        if p.status == "running" and p.steps_done:
            mean = sum(p.step_times) / len(p.step_times) if p.step_times else 0
            bubble = p.measured_bubble()
            extra = f" · bubble {100 * bubble:.0f}%" if bubble is not None else ""
            self.set_status(f"Running {p.config.get('strategy')} on {', '.join(p.devices)} · step "
                            f"{p.steps_done}/{p.steps_total} · {mean * 1000:.1f} ms/step{extra}")

    def _on_finished(self, info: dict) -> None:
        p = self.plots.progress
        p.status = info["status"]
        p.summary = info.get("summary") or p.summary
        self.redraw_timer.setInterval(IDLE_REDRAW_MS)
        self.telemetry.add(self.worker.take_samples())
        self.plots.mark_run(time.perf_counter() - self.t0, "end")
        summary = info.get("summary") or {}
        took = time.perf_counter() - (self._run_started_at or time.perf_counter())
        if info["status"] == "finished":
            thr = (summary.get("throughput") or {}).get("mean")
            st = (summary.get("step_time_s") or {}).get("mean")
            bubble = (summary.get("bubble") or {}).get("measured")
            parts = [f"Finished {summary.get('steps', p.steps_done)} steps in {format_duration(took)}"]
            if st is not None:
                parts.append(f"{st * 1000:.1f} ms/step")
            if thr is not None:
                parts.append(f"{thr:,.0f} samples/s")
            if bubble is not None:
                parts.append(f"bubble {100 * bubble:.0f}%")
            self.set_status(" · ".join(parts))
            self.progress_bar.setValue(self.progress_bar.maximum())
        elif info["status"] == "stopped":
            self.set_status(f"Stopped after {p.steps_done} of {p.steps_total} steps")
        else:
            self.set_status(f"Failed: {info.get('error') or 'the run failed'}")
        self.time_left.setText("")
        if self.plots.mode == "live":
            self.plots.mode_label.setText(f"Live: this machine's telemetry · last run "
                                          f"{run_label_short(info['run_id'])} {info['status']}")
        self.log(f"run {info['run_id']} {info['status']}")
        self.history.refresh()
        self.plots.redraw(force=True)
        self.plots.refresh_bubble()
        if not self._closing:
            self._start_idle_sampler()
        self._update_run_controls()
        self.sigRunFinished.emit(info)
        if self._close_requested:
            self.close()

    def _on_failed(self, message: str, tb: str) -> None:
        # The cause in words first ("the worker (pid 123) was killed by SIGKILL"), the traceback behind a button.
        self.error_panel.show_error(f"Run failed: {message}", tb)
        self.log(f"run failed: {message}", level="error")
        if tb:
            self.log(tb, level="error")

    def after_busy(self) -> None:
        """An experiment ended: the controls come back; a close that waited for it goes on."""
        self._update_run_controls()
        if self._close_requested:
            self.close()

    # -- the redraw tick -----------------------------------------------------------------------
    def _tick(self) -> None:
        sampler = self._idle_sampler
        if sampler is not None:
            self.telemetry.add(sampler.drain())
        self.telemetry.add(self.worker.take_samples())
        self.plots.redraw()
        if self.worker.is_running():
            self.worker.check_alive()
            self._update_progress()
        elif self.experiments.is_running():
            self._update_progress()
        n = len(self.telemetry.devices)
        source = "run" if self.worker.is_running() else ("idle" if sampler is not None else "off")
        self.telemetry_label.setText(f"telemetry {self.telemetry_hz:g} Hz · {n} device{'s' if n != 1 else ''}"
                                     f" · {source}")

    # -- history -----------------------------------------------------------------------------------
    def _on_history_selection(self, run_ids: list) -> None:
        if not run_ids:
            return
        self.history.load(run_ids)

    def _on_history_loaded(self, token: int, runs: list) -> None:
        if token != self.history.latest_token or not runs:
            return
        self.plots.show_runs(runs)
        self.center_tabs.setCurrentWidget(self.plots)
        self._shown_runs = [r.run_id for r in runs]
        if len(runs) == 1 and runs[0].status in ("failed", "interrupted") and runs[0].error:
            self.error_panel.show_error(f"Run {runs[0].label} {runs[0].status}: {runs[0].error}", None)
        self.sigHistoryShown.emit(self._shown_runs)

    # -- experiments in the history and the result view -------------------------------------------
    def _on_experiment_selected(self, experiment_id: str) -> None:
        experiment = self.store.get_experiment(experiment_id)
        if experiment is None:
            return
        from engine.experiments import stored_result
        result = stored_result(self.store, experiment)
        self.show_experiment_result(result)

    def show_experiment_result(self, result: dict) -> None:
        from engine.experiments import PRESETS
        preset = PRESETS.get(result.get("name") or "")
        self.results.show_result(result, preset.description if preset else "")
        self.center_tabs.setCurrentWidget(self.results)
        self.sigExperimentShown.emit(result.get("experiment_id") or "")

    # -- export ------------------------------------------------------------------------------------
    def export_target(self) -> tuple[str, str] | None:
        """What File › Export writes: what is in view (an experiment's result, a stored run), else the newest run."""
        if self.center_tabs.currentWidget() is self.results and self.results.experiment_id:
            return "experiment", self.results.experiment_id
        if self.history.page == "experiments" and self.history.experiments.selected_id():
            return "experiment", self.history.experiments.selected_id()
        selected = self.history.selected_ids() or self._shown_runs
        if selected:
            return "run", selected[0]
        if self.history.records:
            return "run", self.history.records[0].id
        return None

    def _on_exported(self, paths: list) -> None:
        where = str(Path(paths[0]).parent) if paths else ""
        self.log(f"exported {len(paths)} file{'s' if len(paths) != 1 else ''} to {where}: "
                 + ", ".join(Path(p).name for p in paths), status=True)
        self.sigExported.emit(paths)

    def _on_export_failed(self, message: str) -> None:
        self.log(message, status=True, level="error")
        QtWidgets.QMessageBox.warning(self, "Export failed", message)
        self.sigExportFailed.emit(message)

    def back_to_live(self) -> None:
        self.history.table.blockSignals(True)
        self.history.table.clearSelection()
        self.history.table.blockSignals(False)
        self._shown_runs = []
        self.plots.set_mode("live")

    # -- what controllers may change (app/controllers/ call these, never the widgets) ---------------
    def show_progress(self, value: int, maximum: int, text: str) -> None:
        """The progress bar: ``value`` of ``maximum`` (0: busy, no count yet), labelled ``text``."""
        self.progress_bar.setRange(0, maximum)
        self.progress_bar.setValue(value)
        self.progress_bar.setFormat(text)

    def end_progress(self, text: str, complete: bool) -> None:
        if complete:
            self.progress_bar.setValue(self.progress_bar.maximum())
        self.progress_bar.setFormat(text)

    def show_time_left(self, text: str) -> None:
        self.time_left.setText(text)

    def set_redraw_busy(self, busy: bool) -> None:
        """Redraw at the telemetry's rate while work goes, slowly when idle."""
        self.redraw_timer.setInterval(RUN_REDRAW_MS if busy else IDLE_REDRAW_MS)

    def show_error(self, message: str, tb: str | None = None) -> None:
        self.error_panel.show_error(message, tb)

    def hide_error(self) -> None:
        self.error_panel.hide()

    def show_running_experiment(self, experiment_id: str | None) -> None:
        """The history marks this experiment as running (None: none is) and lists what is stored."""
        self.history.experiments.running_id = experiment_id
        self.history.refresh()

    def refresh_history(self) -> None:
        self.history.refresh()

    def select_experiment(self, experiment_id: str) -> None:
        self.history.experiments.select_id(experiment_id)

    def watching_live(self) -> bool:
        """The user looks at the live plots (an experiment's later runs take the view only then)."""
        return self.center_tabs.currentWidget() is self.plots and self.plots.mode == "live"

    def current_run(self) -> RunProgress:
        """The live view's run monitor (app/state/live_data.py)."""
        return self.plots.progress

    def settle_plots(self) -> None:
        self.plots.redraw(force=True)
        self.plots.refresh_bubble()

    def panel_config(self) -> ExperimentConfig:
        """The run options the panel shows (may raise when its values make no config)."""
        return self.experiment.config()

    # -- messages ------------------------------------------------------------------------------
    def set_status(self, text: str) -> None:
        self.status_label.setText(text)

    def log(self, text: str, status: bool = False, level: str = "info") -> None:
        stamp = time.strftime("%H:%M:%S")
        self.log_view.appendPlainText(f"{stamp}  {text}")
        if status:
            self.set_status(text)

    # -- settings ----------------------------------------------------------------------------------
    def restore_settings(self) -> None:
        s = self.settings
        geometry = s.value("window/geometry")
        if isinstance(geometry, (QtCore.QByteArray, bytes)):
            self.restoreGeometry(geometry)
        for key, splitter in (("window/main_split", self.main_split), ("window/right_split", self.right_split)):
            state = s.value(key)
            if isinstance(state, (QtCore.QByteArray, bytes)):
                splitter.restoreState(state)
        if s.value("window/main_split") is None:
            self.main_split.setSizes([430, 1070])
            self.right_split.setSizes([700, 220])
        self.tabs.setCurrentIndex(read_int(s, "window/tab", 0))
        export_dir = s.value("export/dir", "")
        for widget in self.plots.plots.values():
            widget.export_dir = export_dir if isinstance(export_dir, str) else ""
        self.exporter.directory = read_str(s, "export/report_dir")
        self.experiments.menu.repeats_spin.setValue(read_int(s, "experiments/repeats", 3))
        self.experiment.restore(s)

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/main_split", self.main_split.saveState())
        s.setValue("window/right_split", self.right_split.saveState())
        s.setValue("window/tab", self.tabs.currentIndex())
        s.setValue("telemetry/hz", self.telemetry_hz)
        dirs = [w.export_dir for w in self.plots.plots.values() if w.export_dir]
        if dirs:
            s.setValue("export/dir", dirs[-1])
        s.setValue("export/report_dir", self.exporter.directory)
        s.setValue("experiments/repeats", self.experiments.menu.repeats)
        self.experiment.save(s)
        s.sync()

    # -- closing -----------------------------------------------------------------------------------
    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802
        if self.is_busy():
            if not self._close_requested:
                what = "an experiment" if self.experiments.is_running() else "the run"
                answer = QtWidgets.QMessageBox.question(
                    self, f"Stop {what}?",
                    ("An experiment is in progress (its finished runs are kept). Stop it and close Splitscope?"
                     if self.experiments.is_running() else "A run is in progress. Stop it and close Splitscope?"),
                    QtWidgets.QMessageBox.StandardButton.Yes | QtWidgets.QMessageBox.StandardButton.No,
                    QtWidgets.QMessageBox.StandardButton.No)
                if answer != QtWidgets.QMessageBox.StandardButton.Yes:
                    event.ignore()
                    return
                self._close_requested = True
                self.stop_run()
                self.set_status(f"Stopping {what}, then closing…")
                # Should the worker not answer, close anyway; launch() reaps it after the loop.
                QtCore.QTimer.singleShot(CLOSE_STOP_TIMEOUT_MS, self._force_close)
            event.ignore()
            return
        self.shutdown()
        event.accept()

    def _force_close(self) -> None:
        if not self._closed:
            self.log("the run did not stop in time; closing anyway", level="error")
            self.shutdown()
            self.hide()
            self.deleteLater()
            app = QtWidgets.QApplication.instance()
            if app is not None and not any(w.isVisible() for w in app.topLevelWidgets()):
                app.quit()

    def shutdown(self) -> None:
        """Stop timers, the sampler and the planner; save settings. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing = True
        self.redraw_timer.stop()
        try:
            self.save_settings()
        except Exception:
            pass
        self._stop_idle_sampler()
        self.planner.close()
        if self.worker.is_running():  # only after a forced close: end the worker before we go
            self.worker.wait_blocking(5.0)
        if self.experiments.is_running():
            self.experiments.client.wait_blocking(10.0)
        self.store.close()


def run_label_short(run_id: str) -> str:
    return run_id.split("-")[1] if "-" in run_id else run_id
