"""WhatIfClient: a stored run's what-if (engine.planner.what_if), computed in a child process.

The multi-stage schedules' action lists come from torch's own schedule classes,
and the app never imports torch: ``main.py what-if RUN --json`` computes them (forked by the
app's fork server where there is one).
One request at a time; a newer request ends the older one's process, and
``close`` ends whatever is left, so no child outlives the window.
"""
from __future__ import annotations

import sys

from PySide6 import QtCore

from app.services.forked_process import end_process, start_module
from engine.planner.what_if import Prediction
from engine.wire.children import read_list
from engine.wire.codec import WireError


class WhatIfClient(QtCore.QObject):
    sigPredictions = QtCore.Signal(str, list)   # run id, [Prediction]
    sigFailed = QtCore.Signal(str, str)         # run id, why

    def __init__(self, db_path: str, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.db_path = db_path
        self._proc: QtCore.QProcess | None = None
        self.run_id: str | None = None

    def request(self, run_id: str) -> None:
        self._end()
        self.run_id = run_id
        proc = QtCore.QProcess(self)
        proc.finished.connect(lambda code, _status, p=proc: self._on_finished(p, code))
        proc.errorOccurred.connect(lambda error, p=proc: self._on_error(p, error))
        self._proc = proc
        # main.py what-if RUN, forked by the app's fork server (app/services/forked_process.py).
        start_module(proc, "main", ["what-if", run_id, "--json", "--db", self.db_path], f"(what-if of {run_id})")

    def close(self) -> None:
        """End the child, if any; its answer is dropped."""
        self._end()
        self.run_id = None

    def _end(self) -> None:
        proc, self._proc = self._proc, None
        end_process(proc)

    def _on_finished(self, proc: QtCore.QProcess, code: int) -> None:
        if proc is not self._proc:
            return  # an ended request's process
        self._proc = None
        proc.deleteLater()
        out = bytes(proc.readAllStandardOutput().data()).decode("utf-8", "replace")
        err = bytes(proc.readAllStandardError().data()).decode("utf-8", "replace").strip().splitlines()
        try:
            rows = read_list(Prediction, out, "the what-if child") if code == 0 else None
        except WireError:
            rows = None
        if rows is None:
            self.sigFailed.emit(self.run_id or "", err[-1].removeprefix("error: ") if err else f"exit status {code}")
            return
        self.sigPredictions.emit(self.run_id or "", rows)

    def _on_error(self, proc: QtCore.QProcess, error) -> None:
        if proc is self._proc and error == QtCore.QProcess.ProcessError.FailedToStart:
            self._proc = None
            proc.deleteLater()
            self.sigFailed.emit(self.run_id or "", f"could not start {sys.executable}")
