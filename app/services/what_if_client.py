"""WhatIfClient: a stored run's what-if (engine.what_if), computed in a child process.

The multi-stage schedules' action lists come from torch's own schedule classes,
and the app never imports torch: ``main.py what-if RUN --json`` computes them, in
a child the fork server forks (app/services/child_process.py). One request at a
time; a newer request ends the older one's process, and ``close`` ends whatever
is left, so no child outlives the window.
"""
from __future__ import annotations

import json

from PySide6 import QtCore

from app.services.child_process import ChildProcess
from engine.results import from_json
from engine.what_if import Prediction


class WhatIfClient(QtCore.QObject):
    sigPredictions = QtCore.Signal(str, list)   # run id, [Prediction]
    sigFailed = QtCore.Signal(str, str)         # run id, why

    def __init__(self, db_path: str, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.db_path = db_path
        self._proc: ChildProcess | None = None
        self._out = bytearray()
        self.run_id: str | None = None

    def request(self, run_id: str) -> None:
        self._end()
        self.run_id = run_id
        proc = ChildProcess("main", argv=["what-if", run_id, "--json", "--db", self.db_path],
                            title="(the app's what-if)", parent=self)
        self._out = bytearray()
        proc.sigStdout.connect(self._out.extend)
        proc.sigFinished.connect(lambda code, err, p=proc: self._on_finished(p, code, err))
        proc.sigFailedToStart.connect(lambda why, p=proc: self._on_failed_to_start(p, why))
        self._proc = proc
        proc.start()

    def close(self) -> None:
        """End the child, if any; its answer is dropped."""
        self._end()
        self.run_id = None

    def _end(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.end(grace_s=0.0)
        proc.deleteLater()

    def _on_finished(self, proc: ChildProcess, code: int, err: str) -> None:
        if proc is not self._proc:
            return  # an ended request's process
        self._proc = None
        proc.deleteLater()
        lines = err.strip().splitlines()
        try:
            rows = json.loads(bytes(self._out)) if code == 0 else None
        except ValueError:
            rows = None
        if not isinstance(rows, list):
            why = lines[-1].removeprefix("error: ") if lines else f"exit status {code}"
            self.sigFailed.emit(self.run_id or "", why)
            return
        self.sigPredictions.emit(self.run_id or "", [from_json(Prediction, row) for row in rows])

    def _on_failed_to_start(self, proc: ChildProcess, why: str) -> None:
        if proc is self._proc:
            self._proc = None
            proc.deleteLater()
            self.sigFailed.emit(self.run_id or "", why)
