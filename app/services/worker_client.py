"""WorkerClient: one run at a time through the engine's RunSession, marshalled to the UI thread.

RunSession launches the worker process, reads its events, stores them and
samples telemetry, calling back from its own threads. Here those callbacks only
append to queues under a lock and, at most once until the UI thread has caught
up, post one queued signal. So a burst of a thousand step events costs the UI
thread one slot call, and the UI thread never waits on the worker.
"""
from __future__ import annotations

from PySide6 import QtCore

from app.services.sample_queue import SampleQueue
from app.services.stop_deadline import StopDeadline
from app.services.thread_inbox import ThreadInbox
from engine.config import ExperimentConfig
from engine.events import Finished, WorkerEvent
from engine.run.session import RunResult


class WorkerClient(QtCore.QObject):
    sigEvents = QtCore.Signal(list)          # a batch of the worker's events (engine.events), in order
    sigFinished = QtCore.Signal(object)      # engine.run.session.RunResult
    sigFailed = QtCore.Signal(str, str)      # message, traceback (also after sigFinished's "failed")
    sigKilled = QtCore.Signal(str)           # a stop was not honoured in time: what was done

    def __init__(self, db_path: str | None = None, telemetry_hz: float = 10.0,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.db_path = db_path
        self.telemetry_hz = telemetry_hz
        self.session = None
        self.run_id: str | None = None
        self.stopping = False
        self._samples = SampleQueue()
        self._inbox = ThreadInbox(self)
        self._inbox.sigItems.connect(self._deliver)
        self._deadline = StopDeadline(self._kill_if_still_running, "the worker", self)
        self._deadline.sigKilled.connect(self.sigKilled)

    # -- control (UI thread) ------------------------------------------------------
    @staticmethod
    def warm_up() -> None:
        """Start this process's fork server now (engine.forkserver): it imports torch while the user picks a
        run, so the first run's ranks need not wait for it. A Popen; torch stays out of this process."""
        from engine import forkserver
        forkserver.shared()

    def is_running(self) -> bool:
        return self.session is not None

    def start(self, config: ExperimentConfig) -> str:
        if self.session is not None:
            raise RuntimeError("a run is already going; stop it first")
        from engine.run.session import RunSession
        self.stopping = False
        self._inbox.clear()
        self._samples.take()   # a previous run's last samples
        session = RunSession(config, db_path=self.db_path, telemetry_hz=self.telemetry_hz,
                             on_event=self._on_event, on_samples=self._on_samples)
        self.session = session
        try:
            self.run_id = session.start()
        except Exception:
            self.session = None
            raise
        return self.run_id

    def stop(self) -> None:
        """Ask the run to stop; returns at once. sigFinished follows within a few seconds."""
        if self.session is not None and not self.stopping:
            self.stopping = True
            self.session.stop()
            self._deadline.start()

    def kill(self) -> None:
        """End the worker and its ranks now; sigFinished follows (status "failed", killed by SIGKILL)."""
        if self.session is not None:
            self.session.kill()

    def _kill_if_still_running(self) -> bool:
        session = self.session
        if session is None or not session.is_running():
            return False
        session.kill()
        return True

    def wait_blocking(self, timeout: float) -> bool:
        """Only for shutdown, after the event loop ended: stop and wait for the worker to end."""
        session = self.session
        if session is None:
            return True
        session.stop()
        session.wait(timeout)
        if session.is_running():  # not honoured: kill, then give the reader a moment to store the end
            session.kill()
            session.wait(2.0)
        return not session.is_running()

    def check_alive(self) -> bool:
        """Called on the UI tick: a session whose reading thread died without a word ends as failed.

        RunSession promises a closing ``finished`` event; should its thread die of a
        bug first, the app must not show "running" forever.
        """
        session = self.session
        if session is None:
            return True
        if session.is_running():  # its thread goes on (it says finished before it ends)
            return True
        if self._inbox.has_pending():  # the finished event is on its way
            return True
        self._finish(Finished(t=0.0, run_id=self.run_id, status="failed",
                              error="the run session ended without a result (an engine error; see the terminal)"))
        return False

    def take_samples(self) -> list:
        return self._samples.take()

    # -- callbacks (RunSession's threads) ------------------------------------------------
    def _on_event(self, event: WorkerEvent) -> None:
        self._inbox.put(event)

    def _on_samples(self, samples: list) -> None:
        self._samples.add(samples)

    # -- delivery (UI thread) --------------------------------------------------------
    def _deliver(self, events: list[WorkerEvent]) -> None:
        self.sigEvents.emit(events)
        for event in events:
            if isinstance(event, Finished) and event.run_id is not None:
                # RunSession's own closing event: everything is stored by now.
                self._finish(event)

    def _finish(self, event: Finished) -> None:
        session, self.session = self.session, None
        self._deadline.cancel()
        result = session.result if session is not None else None
        if result is None:  # the session's thread died before it could say how the run ended
            result = RunResult(event.run_id or self.run_id or "", event.status, event.summary, event.error)
        self.stopping = False
        self.sigFinished.emit(result)
        if result.status == "failed":
            self.sigFailed.emit(result.error or "the run failed", result.traceback or "")
