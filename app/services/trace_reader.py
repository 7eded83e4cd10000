"""TraceReader: a job's profiler traces read and stored as a run of kind trace, in a child process.

``main.py trace PATH... --store --json --progress --db DB`` (or ``--run RUN_ID``: the traces a run stored;
engine/traces/command.py) reads them off the UI
thread and out of the app's process: a 1 GB folder is minutes of pure-Python decoding that would otherwise
hold the GIL against the window, and the reader's own worker processes start from there. It tells each file
read on stderr (``progress: N/TOTAL FILE``) and answers with the job's JSON and its ``run_id``. One reading
at a time; a newer one ends the older one's process, and ``close`` ends whatever is left, so no child outlives
the window.
"""
from __future__ import annotations

import sys

from PySide6 import QtCore

from app.services.forked_process import end_process, start_module
from engine.wire import codec
from engine.wire.children import StoredTraces

PROGRESS = "progress: "   # engine/traces/command.py's lines on stderr


class TraceReader(QtCore.QObject):
    sigProgress = QtCore.Signal(int, int, str)   # files read, files in all, the file just read
    sigStored = QtCore.Signal(str)               # the run's id
    sigFailed = QtCore.Signal(str)               # why, in one line

    def __init__(self, db_path: str, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.db_path = db_path
        self._proc: QtCore.QProcess | None = None
        self._errors: list[str] = []

    def busy(self) -> bool:
        return self._proc is not None

    def read(self, paths: list[str]) -> None:
        """The traces ``paths`` name (files or folders)."""
        self._start(paths)

    def read_run(self, run_id: str) -> None:
        """The traces the run ``run_id`` stored (--profile-steps), kept as a run named for it."""
        self._start(["--run", run_id])

    def _start(self, what: list[str]) -> None:
        self._end()
        self._errors = []
        proc = QtCore.QProcess(self)
        proc.setReadChannel(QtCore.QProcess.ProcessChannel.StandardError)   # its lines read as they come
        proc.readyReadStandardError.connect(lambda p=proc: self._on_stderr(p))
        proc.finished.connect(lambda code, _status, p=proc: self._on_finished(p, code))
        proc.errorOccurred.connect(lambda error, p=proc: self._on_error(p, error))
        self._proc = proc
        start_module(proc, "main", ["trace", *what, "--store", "--json", "--progress", "--db", self.db_path],
                     "(reading profiler traces)")

    def close(self) -> None:
        """End the child, if any; its answer is dropped."""
        self._end()

    def _end(self) -> None:
        proc, self._proc = self._proc, None
        end_process(proc)

    def _on_stderr(self, proc: QtCore.QProcess) -> None:
        if proc is not self._proc:
            return
        while proc.canReadLine():   # stderr is the read channel (not merged with stdout): its lines are whole
            self._take_line(bytes(proc.readLine().data()).decode("utf-8", "replace").strip())

    def _take_line(self, line: str) -> None:
        """A progress line told on, any other kept: the last ``error:`` one says why it failed."""
        counts, _, path = line.removeprefix(PROGRESS).partition(" ")
        done, _, total = counts.partition("/")
        if line.startswith(PROGRESS) and done.isdigit() and total.isdigit():
            self.sigProgress.emit(int(done), int(total), path)
        elif line:
            self._errors.append(line)

    def _on_finished(self, proc: QtCore.QProcess, code: int) -> None:
        if proc is not self._proc:
            return  # an ended reading's process
        self._on_stderr(proc)
        for line in bytes(proc.readAllStandardError().data()).decode("utf-8", "replace").splitlines():
            self._take_line(line.strip())   # a last line without its newline
        self._proc = None
        proc.deleteLater()
        out = bytes(proc.readAllStandardOutput().data()).decode("utf-8", "replace")
        try:
            run_id = codec.read(StoredTraces, out, "the trace child").run_id if code == 0 else None
        except codec.WireError:
            run_id = None
        if not isinstance(run_id, str):
            said = [line.removeprefix("error: ") for line in self._errors if line.startswith("error: ")]
            self.sigFailed.emit(said[-1] if said else self._errors[-1] if self._errors else f"exit status {code}")
            return
        self.sigStored.emit(run_id)

    def _on_error(self, proc: QtCore.QProcess, error) -> None:
        if proc is self._proc and error == QtCore.QProcess.ProcessError.FailedToStart:
            self._proc = None
            proc.deleteLater()
            self.sigFailed.emit(f"could not start {sys.executable}")
