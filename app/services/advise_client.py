"""AdviseClient: ``main.py advise ... --json`` in a child process, its progress lines as they come, its answer typed.

Advise probes the model in a child that imports torch, and checks its best candidates by runs: all of it in the
command's own process tree (docs/advise.md), which the app starts as it starts the what-if (forked by its fork
server, app/services/forked_process.py) and never waits on: QProcess hands its lines over through the event loop.
Its stderr says each stage in a line ("advise: probing ...", "advise: check 2 of 3: ..."), its stdout the answer.

Stop is SIGTERM, which the relay passes on: during the checks advise stops the running check (its worker honours
a stop within 3 s) and answers with what it measured so far; during the probe the command ends at once, and its
probe's processes with it (each ends with its parent: engine/parent_death.py). A stop not honoured within
StopDeadline's seconds kills the relay, whose end ends the command (the fork server kills what a closed
connection asked for). One advise at a time; ``close`` ends it with the window.
"""
from __future__ import annotations

import sys

from PySide6 import QtCore

from app.services.forked_process import start_module
from app.services.stop_deadline import StopDeadline
from app.state.advise_rows import failure_of
from engine.advise.answer import read_advice
from engine.wire import codec

KEPT_LINES = 200   # of its stderr: the last say why it failed


class AdviseClient(QtCore.QObject):
    sigProgress = QtCore.Signal(str)            # one of advise's lines on stderr, as it comes
    sigEnded = QtCore.Signal(object, str, str)  # Advice or None; "finished", "stopped" or "failed"; why it failed
    sigKilled = QtCore.Signal(str)              # a stop was not honoured: what was killed

    def __init__(self, db_path: str, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.db_path = db_path
        self.stopping = False
        self._proc: QtCore.QProcess | None = None
        self._err = b""
        self._lines: list[str] = []
        self._deadline = StopDeadline(self._kill, "advise", self)
        self._deadline.sigKilled.connect(self.sigKilled)

    def is_running(self) -> bool:
        return self._proc is not None

    def start(self, args: list[str], telemetry_hz: float) -> None:
        """``main.py advise ARGS`` (the model, devices, batch and options: engine/advise/command.py
        advise_args), its checks stored in the window's store."""
        if self._proc is not None:
            raise RuntimeError("advise is already going; stop it first")
        self.stopping = False
        self._err, self._lines = b"", []
        proc = QtCore.QProcess(self)
        proc.setProcessChannelMode(QtCore.QProcess.ProcessChannelMode.SeparateChannels)
        proc.readyReadStandardError.connect(lambda p=proc: self._on_stderr(p))
        proc.finished.connect(lambda code, _status, p=proc: self._on_finished(p, code))
        proc.errorOccurred.connect(lambda error, p=proc: self._on_error(p, error))
        self._proc = proc
        command = ["advise", *args, "--telemetry-hz", f"{telemetry_hz:g}", "--db", self.db_path, "--json"]
        start_module(proc, "main", command, "(advise)")

    def stop(self) -> None:
        """Ask advise to stop (SIGTERM); it answers with what it checked, or ends; killed if it lingers."""
        if self._proc is None or self.stopping:
            return
        self.stopping = True
        self._proc.terminate()
        self._deadline.start()

    def close(self, wait_ms: int = 5_000) -> None:
        """For the window's end: stop, wait up to ``wait_ms`` (its runs end in order), then kill. Its answer is
        dropped."""
        proc, self._proc = self._proc, None
        self._deadline.cancel()
        if proc is None:
            return
        if proc.state() != QtCore.QProcess.ProcessState.NotRunning:
            proc.terminate()
            if not proc.waitForFinished(wait_ms):
                proc.kill()
                proc.waitForFinished(2_000)
        proc.deleteLater()

    def _kill(self) -> bool:
        proc = self._proc
        if proc is None or proc.state() == QtCore.QProcess.ProcessState.NotRunning:
            return False
        proc.kill()
        return True

    def _on_stderr(self, proc: QtCore.QProcess) -> None:
        if proc is not self._proc:
            return
        self._err += bytes(proc.readAllStandardError().data())
        *lines, self._err = self._err.split(b"\n")
        for raw in lines:
            self._take_line(raw)

    def _take_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            self._lines = (self._lines + [line])[-KEPT_LINES:]
            self.sigProgress.emit(line)

    def _on_finished(self, proc: QtCore.QProcess, code: int) -> None:
        if proc is not self._proc:
            return   # closed: its answer is dropped
        self._on_stderr(proc)
        self._take_line(self._err)   # a last line without its newline
        self._err = b""
        out = bytes(proc.readAllStandardOutput().data()).decode("utf-8", "replace")
        stopping = self.stopping
        self._end(proc)
        self.sigEnded.emit(*answer_of(out, code, stopping, self._lines))

    def _on_error(self, proc: QtCore.QProcess, error) -> None:
        if proc is self._proc and error == QtCore.QProcess.ProcessError.FailedToStart:
            self._end(proc)
            self.sigEnded.emit(None, "failed", f"could not start {sys.executable}")

    def _end(self, proc: QtCore.QProcess) -> None:
        self._proc = None
        self.stopping = False
        self._deadline.cancel()
        proc.deleteLater()


def answer_of(out: str, code: int, stopping: bool, stderr_lines: list[str]) -> tuple:
    """What advise's end says, as sigEnded carries it: (the Advice or None, "finished", "stopped" or "failed", why
    it failed). ``out``: its stdout, the ``--json`` answer; ``stopping``: a stop was asked; a stop during the
    checks still answers, with the note "stopped"."""
    try:
        advice = read_advice(codec.loads(out, "advise's answer")) if code == 0 and out.strip() else None
    except ValueError:   # codec.WireError is one
        advice = None
    if advice is not None:
        stopped = stopping or "stopped" in advice.notes
        return advice, "stopped" if stopped else "finished", ""
    if stopping:
        return None, "stopped", "stopped before any candidate was predicted"
    return None, "failed", failure_of(stderr_lines, code)
