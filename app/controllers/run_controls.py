"""RunControls: whether Run, Stop, the presets and the settings can be used now, and why Run cannot.

It follows the app's model (app/state/app_model.py): whenever work begins, is asked to stop
or ends (``activity``), or the check changes (``plan``), the controls are set again; the
rules themselves are app/state/run_rules.py. No controller calls it.
"""
from __future__ import annotations

from PySide6 import QtCore

from app.state import run_rules
from app.state.app_model import AppModel


class RunControls(QtCore.QObject):
    def __init__(self, model: AppModel, views: dict, parent: QtCore.QObject | None = None):
        """``views``: what it enables (run, stop and watch actions, the panel, the split view, the what-if
        rows, the run box, the Experiments menu)."""
        super().__init__(parent)
        self.model = model
        self.views = views
        model.events.activity.connect(lambda _activity: self.update())
        model.events.plan.connect(lambda _plan: self.update())

    def update(self) -> None:
        views, model = self.views, self.model
        activity, reason = model.activity, model.blocked_reason()
        views["run"].setEnabled(reason is None)
        views["what_if_rows"].setEnabled(not activity.busy)
        views["stop"].setEnabled((activity.busy and not activity.stopping) or activity.waiting_check)
        views["watch"].setEnabled(not activity.busy)
        views["presets"].set_presets_enabled(not activity.busy)
        for view in (views["panel"], views["split"]):
            view.setEnabled(not activity.busy)
        views["run_box"].show_reason(run_rules.ready_text(reason, model.plan.check),
                                     blocked=reason is not None and not activity.busy)
