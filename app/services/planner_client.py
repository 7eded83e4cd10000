"""PlannerClient: talks to the planner process (app.services.planner_service) without blocking the UI.

Validation and block profiling need torch; the planner process has it, the app
never does. The planner is forked by the app's fork server (app/services/child_process.py):
torch is imported there once for the planner and every run. Its output comes
through the event loop, so nothing here waits. Requests are debounced and
numbered; answers to stale requests are dropped.
"""
from __future__ import annotations

import json
import os

from PySide6 import QtCore

from app.services.child_process import ROOT, ChildProcess


class PlannerClient(QtCore.QObject):
    sigReady = QtCore.Signal()
    sigChecked = QtCore.Signal(int, dict)     # request id, {"problems", "warnings", "stages", ...}
    sigProfiled = QtCore.Signal(int, dict)    # request id, {"blocks", "costs_by_kind", "error"}
    sigCrashed = QtCore.Signal(str)

    DEBOUNCE_MS = 120

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._proc: ChildProcess | None = None
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
    def start(self) -> None:
        if self._proc is not None:
            return
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        proc = ChildProcess("app.services.planner_service", env=env, title="(the app's planner)", parent=self)
        proc.sigStdout.connect(self._on_output)
        proc.sigFinished.connect(self._on_finished)
        proc.sigFailedToStart.connect(self._on_failed_to_start)
        self._proc = proc
        self._buffer = b""
        self.ready = False
        proc.start()

    def close(self) -> None:
        """End the planner process: EOF on its stdin, then a kill if it lingers."""
        self._closing = True
        self._debounce.stop()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # The planner exits on EOF within milliseconds unless it is in the middle of a profile; killing it then
        # loses nothing.
        proc.end(grace_s=0.3)
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
        line = json.dumps({"id": self.latest_id, "config": config, "profile": profile, "stages": stages}) + "\n"
        self._proc.write(line.encode())

    # -- answers ---------------------------------------------------------------
    def _on_output(self, data: bytes) -> None:
        if self._proc is None or self.sender() is not self._proc:
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            kind = msg.get("kind")
            if kind == "ready":
                self.ready = True
                self.sigReady.emit()
            elif kind == "check" and msg.get("id") == self.latest_id:
                self.sigChecked.emit(msg["id"], msg)
            elif kind == "blocks" and msg.get("id") == self.latest_id:
                self.sigProfiled.emit(msg["id"], msg)

    def _on_finished(self, code: int, err: str) -> None:
        if self._proc is None or self.sender() is not self._proc:
            return  # an ended planner's
        self._proc.deleteLater()
        self._proc = None
        self.ready = False
        if self._closing:
            return
        tail = err.strip().splitlines()[-3:]
        self.sigCrashed.emit(f"the planner process ended (exit {code}): {' '.join(tail)}")
        if self._restarts < 2:  # a crash in a user's model file must not end validation for good
            self._restarts += 1
            self.start()
            if self._pending is None and self._last is not None:
                self._pending = self._last
            if self._pending is not None:
                self._debounce.start()

    def _on_failed_to_start(self, why: str) -> None:
        if self._proc is None or self.sender() is not self._proc:
            return
        self._proc.deleteLater()
        self._proc = None
        self.ready = False
        if not self._closing:
            self.sigCrashed.emit(f"the planner process failed to start: {why}")
