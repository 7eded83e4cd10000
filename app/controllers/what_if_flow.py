"""WhatIfFlow: the Plan tab's measured step and what-if rows for a run, and a row's Run.

A stored pipeline run's what-if (engine.planner.what_if) is simulated in a child that
imports torch (app/services/what_if_client.py), so it is asked for only once the Plan
tab is in view, and an earlier run's answer never lands under a later one. A row's
Run sets the form to that schedule, stages per device and micro-batches, and the run
starts once the planner has checked that config (``start_when_ready``: this follows the
model's check and activity, app/state/app_model.py, and asks the window's port to run as
a click on Run would). When that run ends, the table it came from stays, the step the run
measured beside the row's prediction (app/state/what_if_rows.py): what the prediction is
worth, told by the run it predicted.
"""
from __future__ import annotations

from PySide6 import QtCore

from app.controllers.window_port import WindowPort
from app.services.what_if_client import WhatIfClient
from app.state import plan_state
from app.state.app_model import AppModel
from app.state.what_if_rows import MeasuredRows


class WhatIfFlow(QtCore.QObject):
    def __init__(self, model: AppModel, port: WindowPort, plan_view, center_tabs, store,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model, self.port = model, port
        self.plan_view = plan_view
        self.center_tabs = center_tabs
        self.store = store
        self.client = WhatIfClient(model.db_path, self)
        self.client.sigPredictions.connect(self._on_predictions)
        self.client.sigFailed.connect(
            lambda run_id, why: plan_view.show_what_if_status(f"What-if failed for run {run_id}: {why}"))
        self.runnable = False          # the panel describes the run shown: a row's Run changes only what it predicts
        self.pending: str | None = None   # a run whose what-if waits for the Plan tab to be shown
        self.summary = None               # the run's summary: what its probes measured, beside the rows
        self.config = None                # and its config: which runs' steps are its rows' (MeasuredRows)
        self.start_when_ready = False     # a row asked for a run: it starts once its config is checked
        self.measured = MeasuredRows()    # the runs of this window, by the row they ran
        self.shown: tuple | None = None   # the table in view: (run id, its predictions, what they took)
        self.row_ran = False              # a row's Run started a run: at its end the table it came from stays
        plan_view.sigRunPrediction.connect(self.run_prediction)
        center_tabs.currentChanged.connect(lambda _index: self.ask())
        model.events.plan.connect(lambda _plan: self._start_if_ready())
        model.events.activity.connect(lambda _activity: self._start_if_ready())

    def show_run(self, run_id: str | None, runnable: bool) -> None:
        """The Plan tab's measured step and what-if rows for a stored run (None: none)."""
        from engine.planner.what_if import unpredictable
        record = self.store.get_run(run_id) if run_id else None
        if record is not None and record.status == "finished":
            self.measured.add(run_id, record.config, record.summary)
        if self.row_ran and runnable and record is not None and self.shown is not None \
                and self.measured.same_table(self.config, record.config):
            self.row_ran = False
            self._show_table()   # the table the row came from, its run measured beside it
            return
        self.row_ran = False
        self.runnable = runnable
        summary = self.summary = record.summary if record is not None else None
        self.config = record.config if record is not None else None
        self.shown = None
        plan = summary.plan if summary is not None else None
        rows = self.store.timeline(run_id, steps=self.store.timeline_steps(run_id, last=1)) if plan else []
        self.plan_view.show_measured_step(plan, list(summary.devices) if plan else [], rows)
        why = unpredictable(summary) if summary is not None and record.status == "finished" else ""
        self.client.close()   # an earlier run's answer must not land under this one
        self.pending = run_id if why is None else None
        if why is None:
            self.plan_view.show_what_if_status(f"What-if: simulating every schedule from run {run_id}...")
            self.ask()
        else:
            self.plan_view.show_what_if_status(f"What-if: {why}." if why else "")

    def ask(self) -> None:
        """Start the pending what-if once the Plan tab is in view: each one is a child that imports torch,
        not worth it for every run clicked in the history."""
        if self.pending and self.center_tabs.currentWidget() is self.plan_view:
            self.client.request(self.pending)
            self.pending = None

    def _on_predictions(self, run_id: str, predictions: list) -> None:
        from engine.planner.what_if import measured_inputs
        if run_id == self.client.run_id:
            self.shown = (run_id, predictions, measured_inputs(self.summary, {p.schedule for p in predictions}))
            self._show_table()

    def _show_table(self) -> None:
        """The rows in view, each with the step its run measured where a run of it was made."""
        run_id, predictions, inputs = self.shown
        telemetry = self.summary.telemetry if self.summary is not None else None
        self.plan_view.show_predictions(predictions, self.runnable, inputs,
                                        measured=[self.measured.of(self.config, p) for p in predictions],
                                        source=(run_id, telemetry.disturbed if telemetry is not None else None))

    def run_prediction(self, schedule: str, stages_per_device: int, micro_batches: int) -> None:
        """A row's Run: the pipeline with that schedule, stages per device and micro-batches, started once it
        is checked."""
        self.port.fill_form({"strategy": "pipeline", "schedule": schedule, "stages_per_device": stages_per_device,
                             "micro_batches": micro_batches})
        self.start_when_ready = True
        self.row_ran = True
        self._start_if_ready()

    def _start_if_ready(self) -> None:
        model = self.model
        ready = model.blocked_reason() is None and not model.busy
        if self.take_start(model.plan.check == plan_state.PROBLEMS, ready=ready):
            QtCore.QTimer.singleShot(0, self.port.start_run)   # a what-if row's run, as a click on Run would

    def take_start(self, problems: bool, ready: bool) -> bool:
        """Whether a row's run starts now: its config checked and Run enabled (``ready``); one found to have
        ``problems`` starts never (they show; no later surprise)."""
        if self.start_when_ready and (problems or ready):
            self.start_when_ready = False
            return ready and not problems
        return False

    def close(self) -> None:
        self.client.close()
