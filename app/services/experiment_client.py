"""ExperimentClient: one experiment at a time through the engine's ExperimentRunner, marshalled to the UI thread.

``ExperimentRunner.run()`` blocks for the whole experiment (every run of every
point, one after another), so it runs on a named background thread. Its
callbacks (progress from that thread, run events from each RunSession's
threads) go into one queue under a lock, in the order they happen, and one
queued signal tells the UI thread to drain it: a progress item is always
delivered before the events of the run it announces.

Building the runner happens on the thread too: a preset may profile the model
(``split-point`` plans the split), which imports torch, and the app's process
keeps torch off its UI thread.

Each run's telemetry (its devices, as RunSession samples them) waits in a SampleQueue
under a lock until the window's redraw tick takes it, as WorkerClient's does: the
live plots follow an experiment's runs as they follow a single run.
"""
from __future__ import annotations

import threading
import traceback

from PySide6 import QtCore

from app.services.sample_queue import SampleQueue
from app.services.stop_deadline import StopDeadline
from app.services.thread_inbox import ThreadInbox
from app.state.experiment_status import PointRun
from engine.config import ExperimentConfig


class ExperimentClient(QtCore.QObject):
    sigStarted = QtCore.Signal(str, int)        # preset name, total runs
    sigProgress = QtCore.Signal(int, int, str, object)  # k, n, point label, the run's PointRun (app/state)
    sigEvents = QtCore.Signal(list)             # protocol events of the current run, in order
    sigFinished = QtCore.Signal(object)         # engine.results.ExperimentResult
    sigFailed = QtCore.Signal(str, str)         # message, traceback: the experiment could not go on
    sigKilled = QtCore.Signal(str)              # a stop was not honoured: what was killed

    def __init__(self, db_path: str | None = None, telemetry_hz: float = 10.0,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.db_path = db_path
        self.telemetry_hz = telemetry_hz
        self.name: str | None = None
        self.runner = None
        self.stopping = False
        self.progress: PointRun | None = None
        self.experiment_id: str | None = None
        self._thread: threading.Thread | None = None
        self._samples = SampleQueue()
        self._inbox = ThreadInbox(self)
        self._inbox.sigItems.connect(self._deliver)
        self._generation = 0
        # A stop not honoured in time ends the current run's worker with SIGKILL.
        self._deadline = StopDeadline(lambda: self._thread is not None and self.kill(), "the run", self)
        self._deadline.sigKilled.connect(self.sigKilled)

    # -- control (UI thread) ------------------------------------------------------
    def is_running(self) -> bool:
        return self._thread is not None

    def start(self, name: str, base: ExperimentConfig, repeats: int = 3) -> None:
        if self._thread is not None:
            raise RuntimeError("an experiment is already going; stop it first")
        self.name = name
        self.stopping = False
        self.progress = None
        self.experiment_id = None
        self._generation += 1
        self._inbox.clear()
        self.take_samples()
        self._thread = threading.Thread(target=self._work, args=(self._generation, name, base, repeats),
                                        name=f"experiment-{name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current run ends (it is asked to stop now); sigFinished keeps what finished."""
        if self._thread is None or self.stopping:
            return
        self.stopping = True
        runner = self.runner
        if runner is not None:
            runner.stop()
        self._deadline.start()

    def kill(self) -> bool:
        """End the current run's worker now (SIGKILL to its process group); True if there was one."""
        runner = self.runner
        if runner is None:
            return False
        running = runner.is_running_a_run()
        runner.kill()  # no next run either
        return running

    def take_samples(self) -> list:
        """The current run's telemetry sampled since the last call (UI thread, on the redraw tick)."""
        return self._samples.take()

    def wait_blocking(self, timeout: float) -> bool:
        """Only for shutdown, after the event loop ended: stop, kill if need be, join the thread."""
        thread = self._thread
        if thread is None:
            return True
        if self.runner is not None:
            self.runner.stop()
        thread.join(timeout / 2)
        if thread.is_alive():
            self.kill()
            thread.join(timeout / 2)
        return not thread.is_alive()

    # -- the experiment thread ------------------------------------------------------
    def _work(self, generation: int, name: str, base: ExperimentConfig, repeats: int) -> None:
        try:
            from engine.experiments import ExperimentRunner
            runner = ExperimentRunner(
                name, base, repeats=repeats, db_path=self.db_path, telemetry_hz=self.telemetry_hz,
                on_progress=lambda k, n, label: self._on_progress(generation, name, k, n, label),
                on_event=lambda event: self._post(generation, ("event", event)),
                on_samples=lambda samples: self._on_samples(generation, samples))
            self.runner = runner
            self._post(generation, ("started", name, runner.total_runs))
            if self.stopping:   # Stop pressed while the runner was being built
                runner.stop()
            result = runner.run()
            self._post(generation, ("finished", result))
        except Exception as exc:  # a preset that cannot be built, a store that cannot be written
            self._post(generation, ("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()))

    def _on_progress(self, generation: int, name: str, k: int, n: int, label: str) -> None:
        runner = self.runner
        points, repeats, config = 0, 1, None
        if runner is not None and runner.points:
            points, repeats = len(runner.points), max(1, runner.repeats)
            config = runner.points[min(points - 1, (k - 1) // repeats)].config
        run = PointRun(name, k, n, label, points, repeats, config)
        self._post(generation, ("progress", run, runner.experiment_id if runner else None))

    def _on_samples(self, generation: int, samples: list) -> None:
        # Not a stopped experiment's last samples.
        self._samples.add(samples, when=lambda: generation == self._generation)

    def _post(self, generation: int, item: tuple) -> None:
        self._inbox.put((generation, item))

    # -- delivery (UI thread) --------------------------------------------------------
    def _deliver(self, items: list[tuple]) -> None:
        events: list = []
        for generation, item in items:
            if generation != self._generation:
                continue
            kind = item[0]
            if kind == "event":
                events.append(item[1])
                continue
            if events:  # keep the order: a run's events before whatever follows them
                self.sigEvents.emit(events)
                events = []
            if kind == "started":
                self.sigStarted.emit(item[1], item[2])
            elif kind == "progress":
                _, run, experiment_id = item
                self.progress = run
                self.experiment_id = experiment_id or self.experiment_id
                self.sigProgress.emit(run.k, run.n, run.label, run)
            elif kind in ("finished", "failed"):
                self._end()
                if kind == "finished":
                    self.sigFinished.emit(item[1])
                else:
                    self.sigFailed.emit(item[1], item[2])
        if events:
            self.sigEvents.emit(events)

    def _end(self) -> None:
        thread, self._thread = self._thread, None
        self.runner = None
        self.stopping = False
        self._deadline.cancel()
        if thread is not None:
            thread.join(1.0)  # it posted its last item: it is returning now
