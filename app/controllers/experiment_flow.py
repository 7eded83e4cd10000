"""ExperimentFlow: the main window's side of an experiment, from the menu to the result.

The Experiments menu starts a preset with the panel's model, devices, batch and
steps. An experiment is a live run, point after point: it holds the devices as a
run does (RunFlow.hold_devices: the idle sampler stops, each run's own telemetry
comes through the experiment client), each run begins as a run from the Run
button does (RunFlow.begin_live_run: plots, memory, timeline and bubble follow
it, its events go through RunFlow's handler), the live view's header says which
point of how many ("Compare strategies · point 3 of 5: pipeline · run 2 of 3",
app/state/experiment_status.py) and the progress bar counts runs. Stop ends the
current run and keeps the finished points. At the end the header and the status
line say how it ended ("Compare strategies finished: 5 points, best pipeline"),
the result view shows the bars, sweep and table, and the history lists it. The
window names a preset for people (``preset_title``), the log by its id, as the
command line takes it. That it goes, is stopping or ended, and which experiment the store
holds, are the app model's (app/state/app_model.py ``activity`` and ``experiment``): the
controls and the history follow them.
"""
from __future__ import annotations

import time

from PySide6 import QtCore

from app.controllers.window_port import WindowPort
from app.services.experiment_client import ExperimentClient
from app.state import experiment_status, run_status
from app.state.app_model import AppModel
from app.state.experiment_status import PointRun
from app.state.number_formats import format_duration
from app.views.experiments_menu import ExperimentsMenu, preset_base
from engine.events import Finished, WorkerEvent
from engine.experiments.presets import preset_title
from engine.results import ExperimentResult


class ExperimentFlow(QtCore.QObject):
    sigFinished = QtCore.Signal(object)   # the ExperimentResult (status finished, stopped or failed)

    def __init__(self, model: AppModel, port: WindowPort, runs, run_box, center, history,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model, self.port = model, port
        self.center = center        # app/views/center_area.py: the live view, the result, errors
        self.history = history      # app/views/history_panel.py: selects the experiment once it ends
        self.runs = runs            # app/controllers/run_flow.py: each run of the experiment follows as one run does
        self.run_box = run_box      # app/views/run_box.py: the progress counts runs
        self.client = ExperimentClient(db_path=model.db_path, telemetry_hz=model.telemetry_hz, parent=self)
        self.client.sigStarted.connect(self._on_started)
        self.client.sigProgress.connect(self._on_progress)
        self.client.sigEvents.connect(self._on_events)
        self.client.sigFinished.connect(self._on_finished)
        self.client.sigFailed.connect(self._on_failed)
        self.client.sigKilled.connect(lambda msg: model.log(msg, status=True, level="error"))
        self.menu = ExperimentsMenu(port.parent_widget())
        self.menu.sigPresetChosen.connect(self.start)
        self.name: str | None = None
        self.started_at: float | None = None

    # -- control -------------------------------------------------------------------
    def is_running(self) -> bool:
        return self.client.is_running()

    @property
    def stopping(self) -> bool:
        return self.client.stopping

    def start(self, name: str) -> bool:
        model = self.model
        if model.is_busy():
            model.log(f"cannot start experiment {preset_title(name)}: {model.blocked_reason()}", status=True)
            return False
        try:
            base = preset_base(self.port.panel_config())
        except Exception as exc:  # the panel's values do not make a config (e.g. an empty devices box)
            self.center.show_error(f"Cannot start experiment {preset_title(name)}: {type(exc).__name__}: {exc}")
            return False
        repeats = self.menu.repeats
        self.center.hide_error()
        self.name = name
        self.started_at = time.perf_counter()
        self.runs.hold_devices()
        self.client.start(name, base, repeats)
        # busy until the runner says how many runs
        self.run_box.show_progress(0, 0, f"{preset_title(name)}: preparing…")
        self.run_box.show_time_left("")
        model.set_status(f"{preset_title(name)}: preparing the points…")
        model.log(f"experiment {name}: {repeats} repeat{'s' if repeats != 1 else ''} per point, base {base.to_json()}")
        model.begin("experiment")
        return True

    def stop(self) -> None:
        if self.is_running() and not self.stopping:
            self.client.stop()
            self.model.set_status(f"Stopping {preset_title(self.name or '')}: the current run ends, "
                                   "finished runs are kept…")
            self.model.log("experiment stop requested")
            self.model.stop_asked()

    # -- progress ------------------------------------------------------------------
    def _on_started(self, name: str, total: int) -> None:
        self.run_box.show_progress(0, max(1, total), f"{preset_title(name)}: {total} runs")
        self.model.log(f"experiment {name}: {total} runs")

    def _on_progress(self, k: int, n: int, label: str, run: PointRun) -> None:
        """Run ``k`` of ``n`` begins: ``run`` says which point of how many (its config None if the runner
        has no points)."""
        self.run_box.show_progress(k - 1, n, run.bar_text)
        # The first run takes the view; later ones only if the user still watches the live plots.
        watching = self.center.watching_live()
        if run.config is not None:
            self.runs.begin_live_run(None, run.config, run.header, take_view=k == 1 or watching, mark=run.mark)
        self.show_status()
        self.model.log(f"experiment {run.header} (run {k} of {n})")
        if k == 1:   # the experiment is in the store now: the history lists it
            self.model.set_experiment(self.client.experiment_id)

    def _on_events(self, events: list[WorkerEvent]) -> None:
        model = self.model
        self.runs.on_events(events)
        for event in events:
            if isinstance(event, Finished) and event.run_id:
                # RunSession's closing event: this run is stored, show it in the history.
                status = event.status
                model.log(f"run {event.run_id} {status}" + (f": {event.error}" if event.error else ""),
                      level="error" if status == "failed" else "info")
                self.center.run_progress().status = status
                model.run_stored()
                model.telemetry.add(self.client.take_samples())  # a point of a fraction of a second: all it sampled
                self.center.settle_plots()   # the point's summary: its measured and theoretical bubble

    def status_text(self) -> str | None:
        """The status line while a run of the experiment goes (None before the runner says which):
        where the experiment is, then what the run does, its start as a single run's is said."""
        run = self.client.progress
        if run is None:
            return None
        return experiment_status.running_text(run, self.center.run_progress(), self.runs.first_run)

    def show_status(self) -> None:
        """The status line, the progress bar's count and beside it the experiment's time left (before the
        run's first step: what the run does)."""
        text = self.status_text()
        if not text or self.stopping:   # the status line says it stops
            return
        self.model.set_status(text)
        progress = self.center.run_progress()
        elapsed = time.perf_counter() - (self.started_at or time.perf_counter())
        own = run_status.time_left_text(progress)   # until the first run has ended: the run's, said as such
        beside = (run_status.starting_phase(progress)
                  or experiment_status.time_left_text(self.client.progress, progress, elapsed)
                  or (own and f"{own} of this run"))
        if beside is not None:
            self.run_box.show_time_left(beside)

    # -- the end -------------------------------------------------------------------
    def _on_finished(self, result: ExperimentResult) -> None:
        model = self.model
        failed = [p for p in result.points if p.error]
        took = time.perf_counter() - (self.started_at or time.perf_counter())
        status = result.status
        if failed:
            first = failed[0]
            self.center.show_error(f"{preset_title(result.name)}: point {first.label} failed: {first.error}")
        text = experiment_status.finished_text(result)
        model.set_status(f"{text} · took {format_duration(took)}")
        model.log(f"experiment {result.experiment_id} {status}: {text}")
        self.run_box.end_progress(f"{preset_title(result.name)} {status}", complete=status == "finished")
        self._settle(experiment_status.finished_title(result))
        self.center.show_experiment_result(result)
        self.history.select_experiment(result.experiment_id or "")
        self.sigFinished.emit(result)
        model.work_ended()

    def _on_failed(self, message: str, tb: str) -> None:
        model = self.model
        title = preset_title(self.name or "The experiment")
        self.center.show_error(f"{title} failed: {message}", tb)
        model.log(f"experiment {self.name} failed: {message}", level="error")
        if tb:
            model.log(tb, level="error")
        model.set_status(f"{title} failed: {message}")
        self.run_box.show_progress(0, 1, f"{title} failed")
        self._settle(experiment_status.failed_title(self.name or "the experiment"))
        self.sigFinished.emit(ExperimentResult(experiment_id=self.client.experiment_id, name=self.name or "",
                                               status="failed", error=message))
        model.work_ended()

    def _settle(self, title: str) -> None:
        """The experiment ended: the header says so (not its last run's), the devices go back to idle."""
        self.model.telemetry.add(self.client.take_samples())
        self.center.mark_telemetry("end")
        self.center.title_live_view(title)
        self.runs.release_devices()
        self.run_box.show_time_left("")
        self.model.set_experiment(None)
        self.center.settle_plots()
