"""ExperimentFlow: the main window's side of an experiment, from the menu to the result.

The Experiments menu starts a preset with the panel's model, devices, batch and
steps; while it runs, each run takes over the live plots as a single run does
(its events go through RunFlow's handler), and the progress bar
counts runs ("run k of n: label"). Stop ends the current run and keeps the
finished points. At the end the result view shows the bars, sweep and table,
and the history lists the experiment.
"""
from __future__ import annotations

import time

from PySide6 import QtCore

from app.services.experiment_client import ExperimentClient
from app.state.units import format_duration
from app.views.experiments_menu import ExperimentsMenu, preset_base
from engine.results import ExperimentResult


class ExperimentFlow(QtCore.QObject):
    sigFinished = QtCore.Signal(object)   # the ExperimentResult (status finished, stopped or failed)

    def __init__(self, window, runs, run_box):
        super().__init__(window)
        self.window = window
        self.runs = runs            # app/controllers/run_flow.py: each run of the experiment follows as one run does
        self.run_box = run_box      # app/views/run_box.py: the progress counts runs
        self.client = ExperimentClient(db_path=window.db_path, telemetry_hz=window.telemetry_hz, parent=self)
        self.client.sigStarted.connect(self._on_started)
        self.client.sigProgress.connect(self._on_progress)
        self.client.sigEvents.connect(self._on_events)
        self.client.sigFinished.connect(self._on_finished)
        self.client.sigFailed.connect(self._on_failed)
        self.client.sigKilled.connect(lambda msg: window.log(msg, status=True, level="error"))
        self.menu = ExperimentsMenu(window)
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
        w = self.window
        if w.is_busy():
            w.log(f"cannot start experiment {name}: {w.run_blocked_reason()}", status=True)
            return False
        try:
            base = preset_base(w.panel_config())
        except Exception as exc:  # the panel's values do not make a config (e.g. an empty devices box)
            w.show_error(f"Cannot start experiment {name}: {type(exc).__name__}: {exc}")
            return False
        repeats = self.menu.repeats
        w.hide_error()
        self.name = name
        self.started_at = time.perf_counter()
        self.client.start(name, base, repeats)
        self.run_box.show_progress(0, 0, f"{name}: preparing…")   # busy until the runner says how many runs
        self.run_box.show_time_left("")
        w.set_redraw_busy(True)
        w.set_status(f"Experiment {name}: preparing the points…")
        w.log(f"experiment {name}: {repeats} repeat{'s' if repeats != 1 else ''} per point, base {base.to_json()}")
        w.update_run_controls()
        return True

    def stop(self) -> None:
        if self.is_running() and not self.stopping:
            self.client.stop()
            self.window.set_status(f"Stopping experiment {self.name}: the current run ends, finished runs are kept…")
            self.window.log("experiment stop requested")
            self.window.update_run_controls()

    # -- progress ------------------------------------------------------------------
    def _on_started(self, name: str, total: int) -> None:
        self.run_box.show_progress(0, max(1, total), f"{name}: {total} runs")
        self.window.log(f"experiment {name}: {total} runs")

    def _on_progress(self, k: int, n: int, label: str, config) -> None:
        """``config``: the point's ExperimentConfig (None if the runner has no points)."""
        w = self.window
        self.run_box.show_progress(k - 1, n, f"run {k} of {n}: {label}")
        # The first run takes the view; later ones only if the user still watches the live plots.
        watching = w.watching_live()
        if config is not None:
            self.runs.begin_live_run(None, config, f"{self.name}: run {k} of {n}, {label}",
                                     take_view=k == 1 or watching)
        w.set_status(f"Experiment {self.name}: run {k} of {n}: {label}")
        w.log(f"experiment {self.name}: run {k} of {n}: {label}")
        if k == 1:   # the experiment is in the store now: list it
            w.show_running_experiment(self.client.experiment_id)

    def _on_events(self, events: list) -> None:
        w = self.window
        self.runs.on_events(events)
        for event in events:
            if event.get("type") == "finished" and event.get("run_id"):
                # RunSession's closing event: this run is stored, show it in the history.
                status = event.get("status")
                w.log(f"run {event['run_id']} {status}" + (f": {event.get('error')}" if event.get("error") else ""),
                      level="error" if status == "failed" else "info")
                w.current_run().status = status
                w.refresh_history()

    def status_text(self) -> str | None:
        """The status line while a run of the experiment goes, or None when no run reports steps yet."""
        p = self.window.current_run()
        if not self.client.progress or not p.steps_done:
            return None
        k, n, label = self.client.progress
        mean = sum(p.step_times) / len(p.step_times) if p.step_times else 0.0
        return (f"Experiment {self.name}: run {k} of {n}: {label} · step {p.steps_done}/{p.steps_total} · "
                f"{mean * 1000:.1f} ms/step")

    def show_status(self) -> None:
        text = self.status_text()
        if text:
            self.window.set_status(text)

    # -- the end -------------------------------------------------------------------
    def _on_finished(self, result: ExperimentResult) -> None:
        w = self.window
        points = result.points
        failed = [p for p in points if p.error]
        took = time.perf_counter() - (self.started_at or time.perf_counter())

        status = result.status
        text = (f"Experiment {result.name} {status} in {format_duration(took)}: {len(points)} point"
                f"{'s' if len(points) != 1 else ''}")
        if result.best:
            text += f", best {result.best}"
        if failed:
            text += f"; {len(failed)} point{'s' if len(failed) != 1 else ''} failed"
            first = failed[0]
            w.show_error(f"Experiment {result.name}: point {first.label} failed: {first.error}")
        w.set_status(text)
        w.log(f"experiment {result.experiment_id} {status}")
        self.run_box.end_progress(f"{result.name} {status}", complete=status == "finished")
        self._settle()
        w.show_experiment_result(result)
        w.select_experiment(result.experiment_id or "")
        self.sigFinished.emit(result)
        w.after_busy()

    def _on_failed(self, message: str, tb: str) -> None:
        w = self.window
        w.show_error(f"Experiment {self.name} failed: {message}", tb)
        w.log(f"experiment {self.name} failed: {message}", level="error")
        if tb:
            w.log(tb, level="error")
        w.set_status(f"Experiment {self.name} failed: {message}")
        self.run_box.show_progress(0, 1, f"{self.name} failed")
        self._settle()
        self.sigFinished.emit(ExperimentResult(name=self.name or "", status="failed", notes=[message]))
        w.after_busy()

    def _settle(self) -> None:
        w = self.window
        w.set_redraw_busy(False)
        self.run_box.show_time_left("")
        w.show_running_experiment(None)
        w.settle_plots()
