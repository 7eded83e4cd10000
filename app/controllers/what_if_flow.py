"""WhatIfFlow: the Plan tab's measured step and what-if rows for a run, and a row's Run.

A stored pipeline run's what-if (engine.plan.what_if) is simulated in a child that
imports torch (app/services/what_if_client.py), so it is asked for only once the Plan
tab is in view, and an earlier run's answer never lands under a later one. A row's
Run sets the panel to that schedule, stages per device and micro-batches, and the run
starts once the window has checked that config (``start_when_ready``).
"""
from __future__ import annotations

from PySide6 import QtCore

from app.services.what_if_client import WhatIfClient


class WhatIfFlow(QtCore.QObject):
    def __init__(self, window, plan_view, center_tabs, store, db_path: str):
        super().__init__(window)
        self.window = window
        self.plan_view = plan_view
        self.center_tabs = center_tabs
        self.store = store
        self.client = WhatIfClient(db_path, self)
        self.client.sigPredictions.connect(self._on_predictions)
        self.client.sigFailed.connect(
            lambda run_id, why: plan_view.show_what_if_status(f"What-if failed for run {run_id}: {why}"))
        self.runnable = False          # the panel describes the run shown: a row's Run changes only what it predicts
        self.pending: str | None = None   # a run whose what-if waits for the Plan tab to be shown
        self.summary = None               # the run's summary: what its probes measured, beside the rows
        self.start_when_ready = False     # a row asked for a run: it starts once its config is checked
        plan_view.sigRunPrediction.connect(self.run_prediction)
        center_tabs.currentChanged.connect(lambda _index: self.ask())

    def show_run(self, run_id: str | None, runnable: bool) -> None:
        """The Plan tab's measured step and what-if rows for a stored run (None: none)."""
        from engine.plan.what_if import unpredictable
        self.runnable = runnable
        record = self.store.get_run(run_id) if run_id else None
        summary = self.summary = record.summary if record is not None else None
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
        from engine.plan.what_if import measured_inputs
        if run_id == self.client.run_id:
            inputs = measured_inputs(self.summary, {p.schedule for p in predictions})
            self.plan_view.show_predictions(predictions, self.runnable, inputs)

    def run_prediction(self, schedule: str, stages_per_device: int, micro_batches: int) -> None:
        """A row's Run: the pipeline with that schedule, stages per device and micro-batches, started once it
        is checked."""
        self.window.experiment.apply_changes({"strategy": "pipeline", "schedule": schedule,
                                              "stages_per_device": stages_per_device,
                                              "micro_batches": micro_batches})
        self.start_when_ready = True
        self.window.controls.update()

    def take_start(self, problems: bool, ready: bool) -> bool:
        """Whether a row's run starts now: its config checked and Run enabled (``ready``); one found to have
        ``problems`` starts never (they show; no later surprise)."""
        if self.start_when_ready and (problems or ready):
            self.start_when_ready = False
            return ready and not problems
        return False

    def close(self) -> None:
        self.client.close()
