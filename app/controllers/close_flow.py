"""CloseFlow: closing the window while a run or an experiment goes.

The user is asked first; a yes stops the work, and the window closes once it has
ended (RunControls.after_busy), so its last events are stored and nothing is
left running. Should the worker not answer in time, the window closes anyway and
``app.application.run_app`` reaps the worker after the event loop.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

CLOSE_STOP_TIMEOUT_MS = 10_000

Button = QtWidgets.QMessageBox.StandardButton


class CloseFlow(QtCore.QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.requested = False   # a close waits for the run or experiment to end

    def may_close(self) -> bool:
        """Whether the window may close now; when busy, ask (once) to stop first."""
        w = self.window
        if not w.controls.is_busy():
            return True
        if self.requested:
            return False
        experiment = w.controls.activity().experiment
        what = "an experiment" if experiment else "the run"
        question = ("An experiment is in progress (its finished runs are kept). Stop it and close Splitscope?"
                    if experiment else "A run is in progress. Stop it and close Splitscope?")
        answer = QtWidgets.QMessageBox.question(w, f"Stop {what}?", question, Button.Yes | Button.No, Button.No)
        if answer == Button.Yes:
            self.stop_then_close()
            w.set_status(f"Stopping {what}, then closing…")
        return False

    def quit_without_asking(self) -> None:
        """Close now; a run in progress is stopped first (timers and scripts use this, not users)."""
        if self.window.controls.is_busy():
            self.stop_then_close()
        else:
            self.window.close()

    def stop_then_close(self) -> None:
        self.requested = True
        self.window.stop_run()
        QtCore.QTimer.singleShot(CLOSE_STOP_TIMEOUT_MS, self._force_close)

    def _force_close(self) -> None:
        w = self.window
        if w.closed:
            return
        w.log("the run did not stop in time; closing anyway", level="error")
        w.shutdown()
        w.hide()
        w.deleteLater()
        app = QtWidgets.QApplication.instance()
        if app is not None and not any(widget.isVisible() for widget in app.topLevelWidgets()):
            app.quit()
