"""StopDeadline: after a stop is asked, the work has KILL_AFTER_MS to end; then it is killed, and the user told.

The run client and the experiment client both promise the window that a stop
ends within seconds: a worker that hangs (a rank stuck in a collective, a frozen
process) is killed so the app never waits forever.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore

KILL_AFTER_MS = 5_000  # the worker promises to end within 3 s of a stop


class StopDeadline(QtCore.QObject):
    sigKilled = QtCore.Signal(str)  # the stop was not honoured in time: what was killed

    def __init__(self, kill: Callable[[], bool], what: str, parent: QtCore.QObject | None = None):
        """``kill()`` ends the work and says whether there was any; ``what`` names it in the message."""
        super().__init__(parent)
        self._kill, self._what = kill, what
        self._timer = QtCore.QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._expired)

    def start(self) -> None:
        self._timer.start(KILL_AFTER_MS)

    def cancel(self) -> None:
        self._timer.stop()

    def _expired(self) -> None:
        if self._kill():
            self.sigKilled.emit(f"{self._what} did not stop within {KILL_AFTER_MS / 1000:g} s; it was killed")
