"""AdviseFlow: Advise beside Run, for the form's model on its devices: ``main.py advise`` in a child
(app/services/advise_client.py), its stages on the run box's bar and the status line as they come, then every
candidate ranked in the Advise tab (app/views/advise_view.py), where a row's "Use this" fills the form with it.

Advise runs its checks on the devices, so while it goes nothing else runs (app/state/run_rules.py: Run, the
presets and the form wait; Stop stops it): it is the app model's ``activity`` (app/state/app_model.py), which
the controls follow, and Advise itself follows that and the check as Run does. It takes the form's model, devices, batch and options, never its
strategy, split or schedule: those it chooses (engine/advise/command.py ``advise_args``).
"""
from __future__ import annotations

from PySide6 import QtCore

from app.controllers.window_port import WindowPort
from app.services.advise_client import AdviseClient
from app.state.advise_rows import caption, form_choice, progress_of, rows_of
from app.state.app_model import AppModel
from app.views.advise_view import AdviseView
from engine import rules


class AdviseFlow(QtCore.QObject):
    sigEnded = QtCore.Signal(object, str)   # the Advice or None, and "finished", "stopped" or "failed"

    def __init__(self, model: AppModel, port: WindowPort, action, run_box, center_tabs,
                 parent: QtCore.QObject | None = None):
        """``action``: the window's Advise (app/actions.py), shown beside Run in ``run_box``; ``center_tabs``: the
        Advise tab is added there; a row's "Use this" fills the form through ``port``."""
        super().__init__(parent)
        self.model, self.port = model, port
        self.action, self.run_box, self.center_tabs = action, run_box, center_tabs
        self.view = AdviseView()
        center_tabs.addTab(self.view, "Advise")
        run_box.add_beside_run(action, "adviseButton")
        self.client = AdviseClient(model.db_path, self)
        self.client.sigProgress.connect(self._on_line)
        self.client.sigEnded.connect(self.show_answer)
        self.client.sigKilled.connect(lambda message: model.log(message, status=True, level="error"))
        self.view.sigUse.connect(self.use)
        self.advice = None       # the last answer: its rows are in the tab
        self.budget_s: float | None = None   # advise's --budget-s for its checking runs; None: its own (60 s)
        model.events.activity.connect(lambda _activity: self._follow())
        model.events.plan.connect(lambda _plan: self._follow())

    def is_running(self) -> bool:
        return self.client.is_running()

    @property
    def stopping(self) -> bool:
        return self.client.stopping

    def start(self) -> bool:
        """Advise on the form's model and devices; False (and why in the log) where it cannot start now."""
        model = self.model
        reason = model.blocked_reason()
        if reason is not None:
            model.log(f"cannot advise now: {reason}", status=True)
            return False
        from engine.advise.command import advise_args
        config = self.port.panel_config()
        args = advise_args(config) + (["--budget-s", f"{self.budget_s:g}"] if self.budget_s else [])
        self.client.start(args, model.telemetry_hz)
        what = f"{rules.model_label(config)} on {config.devices}"
        self.view.show_status(f"Advise for {what}: starting…", clear=True)
        self.center_tabs.setCurrentWidget(self.view)
        self.run_box.show_progress(0, 0, "Advise: starting")
        self.run_box.show_time_left("")
        model.log("advise: main.py advise " + " ".join(args))
        model.set_status(f"Advise for {what}: starting…")
        model.begin("advise")
        return True

    def stop(self) -> None:
        if not self.client.is_running():
            return
        self.client.stop()
        self.model.set_status("Stopping advise…")
        self.model.stop_asked()

    def _follow(self) -> None:
        """Work began or ended, or the check changed: Advise as Run, "Use this" while nothing goes."""
        self.set_controls(ready=self.model.blocked_reason() is None, busy=self.model.busy)

    def set_controls(self, ready: bool, busy: bool) -> None:
        """Advise as Run (``ready``: the form checked, nothing going), "Use this" when not ``busy``."""
        self.action.setEnabled(ready)
        self.view.set_usable(not busy)

    def close(self) -> None:
        self.client.close()

    # -- the child's lines and answer ------------------------------------------------------------
    def _on_line(self, line: str) -> None:
        self.model.log(line, level="error" if line.startswith("error: ") else "info")
        progress = progress_of(line)
        if progress is None:
            return
        done, total, text = progress
        self.run_box.show_progress(done, total, text)
        self.view.show_status(text + "…")
        if not self.client.stopping:   # the status line says it stops
            self.model.set_status(text)

    def show_answer(self, advice, status: str, why: str) -> None:
        """Advise ended (app/services/advise_client.py ``answer_of``): its candidates in the tab, or why none."""
        model = self.model
        model.end()
        if advice is not None:
            self.advice = advice
            details = "\n".join([f"Why: {advice.why}", *(f"Note: {note}." for note in advice.notes)])
            self.view.show_rows(rows_of(advice), caption(advice, stopped=status == "stopped"), details,
                                usable=not model.busy)
            text = f"Advise {status}: {advice.choice.label} (its row's Use this fills the form)"
        else:
            text = f"Advise {status}: {why}"
            self.view.show_status(text)
        self.run_box.end_progress(text, complete=status == "finished")
        model.log(text, status=True, level="error" if status == "failed" else "info")
        model.run_stored()   # its checks are stored runs
        self.sigEnded.emit(advice, status)

    def use(self, index: int) -> None:
        """A row's "Use this": the form set to that candidate, the split with it; nothing starts."""
        if self.advice is None or not 0 <= index < len(self.view.rows):
            return
        entry = self.view.rows[index].entry
        try:
            chosen = form_choice(self.advice, entry)
        except ValueError as exc:
            self.model.log(f"cannot fill the form with {entry.label}: {exc}", status=True, level="error")
            return
        self.port.fill_form(chosen.changes, chosen.split)
        self.model.log(f"the form now holds {entry.label} on {entry.candidate.devices} (Run runs it)", status=True)
