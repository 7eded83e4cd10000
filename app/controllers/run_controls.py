"""RunControls: whether Run, Stop, the presets and the settings can be used now, and why Run cannot.

Every controller that changes what is going on (a run, an experiment, a check, a
what-if row) calls ``update()``; the rules themselves are app/state/run_rules.py.
"""
from __future__ import annotations

from PySide6 import QtCore

from app.state import plan_state, run_rules


class RunControls(QtCore.QObject):
    def __init__(self, window, flows: dict, views: dict):
        """``flows``: the controllers whose state decides (runs, experiments, plans, what_if, closing, advise);
        ``views``: what it enables (run and stop actions, the panel, the split view, the what-if rows, the
        run box)."""
        super().__init__(window)
        self.window = window
        self.runs, self.experiments, self.plans = flows["runs"], flows["experiments"], flows["plans"]
        self.what_if, self.closing, self.advise = flows["what_if"], flows["closing"], flows["advise"]
        self.views = views

    def is_busy(self) -> bool:
        """A run or an experiment is going (one at a time: they share the devices)."""
        return self.runs.is_running() or self.experiments.is_running()

    def activity(self) -> run_rules.Activity:
        running, advising = self.runs.is_running(), self.advise.is_running()
        stopping = (self.runs.stopping if running else self.advise.stopping if advising
                    else self.experiments.stopping)
        return run_rules.Activity(run=running, experiment=self.experiments.is_running(), stopping=stopping,
                                  advise=advising)

    def blocked_reason(self) -> str | None:
        """Why Run is disabled, or None when it is enabled (app/state/run_rules.py)."""
        state = self.plans.state
        return run_rules.blocked_reason(self.activity(), state.problems, state.check, state.model_name)

    def update(self) -> None:
        views, activity = self.views, self.activity()
        reason = self.blocked_reason()
        views["run"].setEnabled(reason is None)
        self.advise.set_controls(ready=reason is None, busy=activity.busy)
        views["what_if_rows"].setEnabled(not activity.busy)
        problems = self.plans.state.check == plan_state.PROBLEMS
        if self.what_if.take_start(problems, ready=reason is None and not activity.busy):
            QtCore.QTimer.singleShot(0, self.runs.start)   # a what-if row's run, as a click on Run would
        views["stop"].setEnabled(activity.busy and not activity.stopping)
        views["watch"].setEnabled(not activity.busy)
        self.experiments.menu.set_presets_enabled(not activity.busy)
        for view in (views["panel"], views["split"]):
            view.setEnabled(not activity.busy)
        views["run_box"].show_reason(run_rules.ready_text(reason, self.plans.state.check),
                                     blocked=reason is not None and not activity.busy)

    def after_busy(self) -> None:
        """A run or an experiment ended: the controls come back; a close that waited for it goes on."""
        self.update()
        if self.closing.requested:
            self.window.close()
