"""CloseFlow: closing the window while a run or an experiment goes.

The user is asked first; a yes stops the work, and the window closes once it has
ended (the model's ``ended``, app/state/app_model.py), so its last events are stored and
nothing is left running. Should the worker not answer in time, the window closes anyway and
``app.application.run_app`` reaps the worker after the event loop.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.controllers.window_port import WindowPort
from app.state.app_model import AppModel

CLOSE_STOP_TIMEOUT_MS = 10_000

Button = QtWidgets.QMessageBox.StandardButton


class CloseFlow(QtCore.QObject):
    def __init__(self, model: AppModel, port: WindowPort, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model, self.port = model, port
        model.events.ended.connect(self._work_ended)

    @property
    def requested(self) -> bool:
        """A close waits for the run or experiment to end."""
        return self.model.closing

    def may_close(self) -> bool:
        """Whether the window may close now; when busy, ask (once) to stop first."""
        model = self.model
        if not model.is_busy():
            return True
        if model.closing:
            return False
        experiment = model.activity.experiment
        what = "an experiment" if experiment else "the run"
        question = ("An experiment is in progress (its finished runs are kept). Stop it and close Splitscope?"
                    if experiment else "A run is in progress. Stop it and close Splitscope?")
        answer = QtWidgets.QMessageBox.question(self.port.parent_widget(), f"Stop {what}?", question,
                                                Button.Yes | Button.No, Button.No)
        if answer == Button.Yes:
            self.stop_then_close()
            model.set_status(f"Stopping {what}, then closing…")
        return False

    def quit_without_asking(self) -> None:
        """Close now; a run in progress is stopped first (timers and scripts use this, not users)."""
        if self.model.is_busy():
            self.stop_then_close()
        else:
            self.port.close()

    def stop_then_close(self) -> None:
        self.model.closing = True
        self.port.stop_work()
        QtCore.QTimer.singleShot(CLOSE_STOP_TIMEOUT_MS, self._force_close)

    def _work_ended(self) -> None:
        """The run or the experiment ended and the controls came back: a close that waited for it goes on."""
        if self.model.closing:
            self.port.close()

    def _force_close(self) -> None:
        if self.port.closed:
            return
        self.model.log("the run did not stop in time; closing anyway", level="error")
        self.port.force_close()
        app = QtWidgets.QApplication.instance()
        if app is not None and not any(widget.isVisible() for widget in app.topLevelWidgets()):
            app.quit()
