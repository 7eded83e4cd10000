"""RunFlow: one run, from Run to its end: the worker's events to the run's progress, the plots and the status line.

Run starts the configured experiment through the worker client (the idle telemetry
stops: the run samples its own devices). Each batch of the worker's events updates the
live view's run's progress (``RunProgress.apply``), which the window's middle draws from
(app/views/center_area.py); the status line, the progress bar and the time left follow.
That a run goes, is stopping or ended is the app model's ``activity`` (app/state/app_model.py):
the controls follow it. At the end the status line says how it went
(app/state/run_status.py), the history lists the run and the idle telemetry goes on.
An experiment's runs (app/controllers/experiment_flow.py) come through
``hold_devices``, ``begin_live_run`` and ``on_events`` too: the same plots, memory,
timeline and bubble as a run from the Run button.

Between Run and the first step the status line, the run box and the timeline say
what the run does (the protocol's ``launched`` and ``started`` events,
app/state/run_status.py starting_text): the first run after the app started reads
torch from disk in each rank process and takes seconds longer than later ones.
"""
from __future__ import annotations

import time
import traceback

from PySide6 import QtCore, QtWidgets

from app.controllers.window_port import WindowPort
from app.services.idle_telemetry import IdleTelemetry
from app.services.worker_client import WorkerClient
from app.state import run_status
from app.state.app_model import AppModel
from app.state.live_data import RunProgress
from app.state.plan_state import PENDING, PROFILING, configured_theory
from app.views.watch_dialog import WatchDialog
from engine.config import ExperimentConfig
from engine.devices import cuda_visible
from engine.events import Errored, Launched, Started, WorkerEvent
from engine.rules import effective_micro_batches, watches_script
from engine.run.session import RunResult


class RunFlow(QtCore.QObject):
    sigStarted = QtCore.Signal(str)       # run id
    sigFinished = QtCore.Signal(object)   # the RunResult (status finished, stopped or failed)

    def __init__(self, model: AppModel, port: WindowPort, idle: IdleTelemetry, run_box, center, what_if,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model, self.port = model, port
        self.center = center        # app/views/center_area.py: the live view, errors
        self.what_if = what_if      # app/controllers/what_if_flow.py: the Plan tab's rows for the run that ended
        self.idle = idle
        self.run_box = run_box      # app/views/run_box.py: the progress bar and the time left
        self.started_at: float | None = None
        self.runs_begun = 0         # runs begun since the app started, an experiment's too
        self.last_watch: dict[str, str | None] = {}   # the watch dialog's fields, as last accepted
        self.logged_traceback: str | None = None   # the run's error's traceback, in the Log already with its rank
        self.worker = WorkerClient(db_path=model.db_path, telemetry_hz=model.telemetry_hz, parent=self)
        self.worker.sigEvents.connect(self.on_events)
        self.worker.sigFinished.connect(self._on_finished)
        self.worker.sigFailed.connect(self._on_failed)
        self.worker.sigKilled.connect(lambda msg: model.log(msg, status=True, level="error"))
        model.events.plan.connect(lambda _plan: self._start_when_checked())

    def is_running(self) -> bool:
        return self.worker.is_running()

    @property
    def first_run(self) -> bool:
        """The current run is the first since the app started (its ranks load torch from disk)."""
        return self.runs_begun <= 1

    @property
    def stopping(self) -> bool:
        return self.worker.stopping

    # -- control -----------------------------------------------------------------------
    def watch_script(self) -> str | None:
        """Run › Watch a script…: the user's own script as a run (--strategy script); its run id, or None when
        cancelled, busy, or the start failed."""
        if self.model.busy:
            return None
        # the GPUs as the window's inventory counts them (none until it is read): the devices' check takes cuda:K
        dialog = WatchDialog(self.port.parent_widget(), gpus=len(cuda_visible(self.model.gpus)), **self.last_watch)
        if dialog.exec() != QtWidgets.QDialog.DialogCode.Accepted:
            return None
        self.last_watch = dialog.fields()
        return self.start(dialog.config())

    def start(self, config: ExperimentConfig | None = None) -> str | None:
        """Run the configured experiment (or ``config``: a watched script's); its run id, or None when Run is held
        back or the start failed."""
        model = self.model
        if config is None and model.blocked_reason() is not None:
            return None
        if config is None and model.plan.check == PENDING:
            self._wait_for_check()
            return None
        config = config or self.port.current_config()
        self.center.hide_error()
        self.hold_devices()
        self.logged_traceback = None
        try:
            run_id = self.worker.start(config)
        except Exception as exc:
            self.center.show_error(f"Could not start the run: {type(exc).__name__}: {exc}", traceback.format_exc())
            model.log(f"could not start the run: {exc}", level="error")
            self.release_devices()
            model.end()
            return None
        self.begin_live_run(run_id, config, f"run {run_status.short_id(run_id)}")
        self.port.show_watched_command(config if watches_script(config) else None)
        self.run_box.show_time_left("")
        self.show_progress()
        model.log(f"run {run_id}: {config.to_json()}")
        model.begin("run")
        self.sigStarted.emit(run_id)
        return run_id

    def _wait_for_check(self) -> None:
        """Run clicked while the planner checks the form: the run starts when the check passes
        (``_start_when_checked``); the worker's processes start warming now, beside the check."""
        self.model.wait_for_check()
        self.worker.warm_up()
        self.model.log("Run: it starts once the planner has checked the configuration", status=True)

    def _start_when_checked(self) -> None:
        model = self.model
        if not model.activity.waiting_check or model.plan.check in (PENDING, PROFILING):
            return   # not asked, or not checked yet (a split's blocks profiled: Skip, above the split, ends that)
        model.wait_for_check(False)
        reason = model.blocked_reason()
        if reason is None:
            QtCore.QTimer.singleShot(0, self.start)   # after every view has taken the check's answer
        else:
            model.log(f"Run not started: {reason}", status=True, level="warning")

    def hold_devices(self) -> None:
        """A run or an experiment takes the devices: the idle sampler stops (each run samples its own)."""
        self.model.telemetry.add(self.idle.stop())
        self.port.set_redraw_busy(True)

    def release_devices(self) -> None:
        """The run or the experiment ended: this machine's idle telemetry goes on."""
        self.port.set_redraw_busy(False)
        self.port.show_watched_command(None)
        self.center.show_timeline_hint(None)
        if not self.model.closing:
            self.idle.start()

    def begin_live_run(self, run_id: str | None, config: ExperimentConfig, label: str,
                       take_view: bool = True, mark: str | None = None) -> None:
        """A run starts (alone or as part of an experiment): the live plots follow it from its first event.
        ``take_view``: the live plots come to the front (an experiment's later runs leave the user's view);
        ``mark``: the line's text on the telemetry plots where it starts (its label's first part if None)."""
        self.started_at = time.perf_counter()
        self.runs_begun += 1
        progress = RunProgress(run_id=run_id, config=config, steps_total=config.steps,
                               micro_batches=effective_micro_batches(config),
                               split=list(config.split) if config.split else None,
                               status="starting", label=label)
        configured_theory(progress, config)   # its ranks' `started` event replaces it with what they run
        self.center.follow_run(progress, take_view, mark or label.split(",")[0])
        self.center.show_timeline_hint(run_status.starting_text(progress, self.first_run))
        self.center.refresh_bubble()   # the figures of this run's configuration, not the last run's

    def stop(self) -> None:
        if self.model.activity.waiting_check:
            self.model.wait_for_check(False)
            self.model.log("Run cancelled before it started (the check was not in yet)", status=True)
            return
        if not self.worker.is_running() or self.worker.stopping:
            return
        self.worker.stop()
        self.model.set_status("Stopping the run… (the worker ends within 3 s)")
        self.model.log("stop requested")
        self.model.stop_asked()

    # -- the worker's events (UI thread, batched) ---------------------------------------------
    def on_events(self, events: list[WorkerEvent]) -> None:
        progress = self.center.run_progress()
        for event in events:
            progress.apply(event)   # the live view draws what it changed (CenterArea follows the progress)
            if isinstance(event, (Launched, Started)):
                self.center.show_timeline_hint(run_status.starting_text(progress, self.first_run))
            line = run_status.event_log_line(event, progress)
            if line is not None:
                self.model.log(line[0], level=line[1])
            if isinstance(event, Errored):   # its line has the traceback (run_status.event_log_line)
                self.logged_traceback = event.traceback
        self.port.update_progress()

    def show_progress(self) -> None:
        """The progress bar, the time left and the status line, from the run's progress: before the first
        step, what the run is doing (run_status.starting_text)."""
        progress = self.center.run_progress()
        starting = run_status.starting_text(progress, self.first_run)
        if progress.steps_total:
            steps = min(progress.steps_done, progress.steps_total)
            self.run_box.show_progress(steps, progress.steps_total, starting or "step %v / %m")
        else:   # a watched script that ends by itself: a busy bar and the count
            self.run_box.show_progress(0, 0, starting or f"step {progress.steps_done}")
        left = run_status.time_left_text(progress)
        if left is not None:
            self.run_box.show_time_left(left)
        text = run_status.starting_status(progress, self.first_run) or run_status.running_text(progress)
        if text is not None and not self.stopping:   # the status line says it stops
            self.model.set_status(text)

    # -- the end --------------------------------------------------------------------------
    def _on_finished(self, result: RunResult) -> None:
        model = self.model
        progress = self.center.run_progress()
        progress.status = result.status
        progress.summary = result.summary or progress.summary
        model.telemetry.add(self.worker.take_samples())
        self.center.mark_telemetry("end")
        took = time.perf_counter() - (self.started_at or time.perf_counter())
        model.set_status(run_status.finished_text(result, progress, took))
        # A run that ended before its first step no longer says "starting".
        self.run_box.end_progress(None if progress.steps_done else result.status,
                                  complete=result.status == "finished")
        self.run_box.show_time_left("")
        self.center.title_live_view(run_status.last_run_title(result))
        model.log(f"run {result.run_id} {result.status}", level="error" if result.status == "failed" else "info")
        model.run_stored()
        self.what_if.show_run(result.run_id if result.status == "finished" else None, runnable=True)
        self.center.settle_plots()
        self.release_devices()
        model.end()
        self.sigFinished.emit(result)
        model.work_ended()

    def _on_failed(self, message: str, tb: str) -> None:
        # The cause in words first ("the worker (pid 123) was killed by SIGKILL"), the traceback behind a button.
        self.center.show_error(f"Run failed: {message}", tb)
        self.model.log(f"run failed: {message}", level="error")
        if tb and tb != self.logged_traceback:
            self.model.log(tb, level="error")
