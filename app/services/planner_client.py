"""PlannerClient: talks to the planner process (app.services.planner_service) without blocking the UI.

Validation and block profiling need torch; the planner process has it (forked by
the app's fork server where there is one), the app never does. QProcess delivers
its output through the event loop, so nothing here waits. Requests are debounced
and numbered; answers to stale requests are dropped.
"""
from __future__ import annotations

import sys

from PySide6 import QtCore

from app.services.forked_process import start_module
from engine.wire import planner as planner_answers
from engine.wire.codec import WireError

_early: list[PlannerClient] = []   # a planner started before the window was built (start_early)


class PlannerClient(QtCore.QObject):
    sigReady = QtCore.Signal()
    sigChecked = QtCore.Signal(int, object)   # request id, engine.wire.planner.Checked
    sigProfiled = QtCore.Signal(int, object)  # request id, engine.wire.planner.Profiled
    sigProfiling = QtCore.Signal(int, float)  # request id, the share of its profile done
    sigCrashed = QtCore.Signal(str)

    DEBOUNCE_MS = 120

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._proc: QtCore.QProcess | None = None
        self._buffer = b""
        self._next_id = 0
        self.latest_id = 0
        self.ready = False
        self._pending: tuple[dict, bool, int | None] | None = None
        self._last: tuple[dict, bool, int | None] | None = None
        self._closing = False
        self._restarts = 0
        self._debounce = QtCore.QTimer(self, singleShot=True, interval=self.DEBOUNCE_MS)
        self._debounce.timeout.connect(self._send_pending)

    # -- process lifecycle ---------------------------------------------------
    @classmethod
    def start_early(cls) -> None:
        """Start a planner now, for the window about to be built to take (``taken``): its torch import overlaps
        the window's construction (a second and a half of the wait for Run, here)."""
        client = cls()
        client.start()
        _early.append(client)

    @classmethod
    def taken(cls, parent: QtCore.QObject) -> PlannerClient:
        """The planner started early, now ``parent``'s; else a new one (not started)."""
        if not _early:
            return cls(parent)
        client = _early.pop()
        client.setParent(parent)
        return client

    def start(self) -> None:
        if self._proc is not None:
            return
        proc = QtCore.QProcess(self)
        proc.setProcessChannelMode(QtCore.QProcess.ProcessChannelMode.SeparateChannels)
        proc.readyReadStandardOutput.connect(self._on_output)
        proc.finished.connect(self._on_finished)
        proc.errorOccurred.connect(self._on_error)
        self._proc = proc
        self._buffer = b""
        self.ready = False
        # Forked by the app's fork server, torch imported already (app/services/forked_process.py).
        start_module(proc, "app.services.planner_service", [], "(the app's planner)")

    def close(self) -> None:
        """End the planner process: EOF on its stdin, then a kill if it lingers."""
        self._closing = True
        self._debounce.stop()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.readyReadStandardOutput.disconnect(self._on_output)
            proc.finished.disconnect(self._on_finished)
            proc.errorOccurred.disconnect(self._on_error)
        except (RuntimeError, TypeError):
            pass
        if proc.state() != QtCore.QProcess.ProcessState.NotRunning:
            proc.closeWriteChannel()
            # The planner exits on EOF within milliseconds unless it is in the
            # middle of a profile; killing it then loses nothing.
            if not proc.waitForFinished(300):
                proc.kill()
                proc.waitForFinished(2000)
        proc.deleteLater()

    @property
    def started(self) -> bool:
        """A planner process is up or on its way: a request now is answered once it is ready."""
        return self.ready or self._proc is not None

    # -- requests --------------------------------------------------------------
    def request(self, config: dict, profile: bool, stages: int | None = None) -> int:
        """Queue a check (and profile) of ``config``; returns the id its answers will carry."""
        self._next_id += 1
        self.latest_id = self._next_id
        self._pending = (config, profile, stages)
        self._debounce.start()
        return self.latest_id

    def _send_pending(self) -> None:
        if self._pending is None or self._proc is None:
            return
        config, profile, stages = self._pending
        self._last = self._pending
        self._pending = None
        line = planner_answers.request_line(planner_answers.Request(self.latest_id, config, profile, stages)) + "\n"
        self._proc.write(line.encode())

    # -- answers ---------------------------------------------------------------
    def _on_output(self) -> None:
        if self._proc is None:
            return
        self._buffer += bytes(self._proc.readAllStandardOutput().data())
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            try:
                answer = planner_answers.decode(raw)
            except WireError as exc:   # a planner of another version: said, and not taken for an answer
                sys.stderr.write(f"{exc}\n")
                continue
            if isinstance(answer, planner_answers.Ready):
                self.ready = True
                self.sigReady.emit()
            elif getattr(answer, "id", None) != self.latest_id:
                continue   # none, or an answer to a request since replaced
            elif isinstance(answer, planner_answers.Checked):
                self.sigChecked.emit(answer.id, answer)
            elif isinstance(answer, planner_answers.Profiled):
                self.sigProfiled.emit(answer.id, answer)
            elif isinstance(answer, planner_answers.Profiling):
                self.sigProfiling.emit(answer.id, answer.fraction)

    def _on_finished(self, code: int, status) -> None:
        err = b""
        if self._proc is not None:
            err = bytes(self._proc.readAllStandardError().data())
            self._proc.deleteLater()
            self._proc = None
        if self._closing:
            return
        tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
        self.sigCrashed.emit(f"the planner process ended (exit {code}): {' '.join(tail)}")
        if self._restarts < 2:  # a crash in a user's model file must not end validation for good
            self._restarts += 1
            self.start()
            if self._pending is None and self._last is not None:
                self._pending = self._last
            if self._pending is not None:
                self._debounce.start()

    def _on_error(self, error) -> None:
        if error == QtCore.QProcess.ProcessError.FailedToStart and not self._closing:
            self.sigCrashed.emit(f"the planner process failed to start: {error}")
