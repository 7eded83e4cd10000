"""Faults seen from the app (issue 6): the cause is named, the app stays usable, nothing is left running."""
from __future__ import annotations

import os
import signal

import psutil

from engine.wire import worker as protocol
from tests.app.app_helpers import set_small_mlp, wait_ready, wait_steps

RUN_TIMEOUT_MS = 60_000


def test_worker_killed_mid_run_shows_the_cause_and_the_next_run_completes(qtbot, window):
    # A garbled protocol line reaches the app as a warning event: it lands in the Log, nothing breaks.
    window.runs.on_events(list(protocol.read_events(["{oops"])))
    assert "garbled protocol line ignored" in window.log_view.toPlainText()

    set_small_mlp(window, strategy="model-parallel", steps=100_000)
    wait_ready(qtbot, window)
    window.run_action.trigger()
    wait_steps(qtbot, window, 2)
    worker_pid = window.worker.session.pid
    ranks = psutil.Process(worker_pid).children(recursive=True)
    with qtbot.waitSignal(window.sigRunFinished, timeout=30_000) as finished:
        os.kill(worker_pid, signal.SIGKILL)
    info = finished.args[0]
    assert info.status == "failed"
    panel = window.center.error_panel
    assert panel.isVisible()
    message = panel.message.text()
    assert "Run failed" in message and "SIGKILL" in message and str(worker_pid) in message, message
    assert "SIGKILL" in window.status_label.text()
    assert window.history.records[0].status == "failed"
    # The worker's ranks went with it.
    psutil.wait_procs([p for p in ranks if p.is_running()], timeout=10)
    assert not [p for p in ranks if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    # Usable: the next run starts and finishes.
    set_small_mlp(window, strategy="single", devices="cpu:1", steps=3)
    wait_ready(qtbot, window, profiled=False)
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        window.run_action.trigger()
    assert finished.args[0].status == "finished"
    assert "Finished" in window.status_label.text()


class DeafSession:
    """A run whose worker never honours a stop (a rank stuck in a collective, a frozen process)."""

    def __init__(self):
        self.stops = 0
        self.killed = False

    def stop(self):
        self.stops += 1

    def kill(self):
        self.killed = True

    def is_running(self):
        return not self.killed


def test_a_stop_that_is_not_honoured_ends_in_a_kill(qtbot, qapp_configured, monkeypatch):
    from app.services import stop_deadline, worker_client
    monkeypatch.setattr(stop_deadline, "KILL_AFTER_MS", 200)
    client = worker_client.WorkerClient()
    session = client.session = DeafSession()
    with qtbot.waitSignal(client.sigKilled, timeout=5_000) as killed:
        client.stop()
        client.stop()               # a second Esc changes nothing
    assert session.stops == 1 and session.killed
    assert "did not stop within 0.2 s" in killed.args[0]


def test_an_experiment_whose_run_ignores_the_stop_is_killed_too(qtbot, qapp_configured, monkeypatch):
    from app.services import experiment_client, stop_deadline

    class DeafRunner:
        """Its current run ignores stop; only kill() ends it."""
        def __init__(self):
            self.stops = 0
            self.killed = False

        def stop(self):
            self.stops += 1

        def is_running_a_run(self):
            return not self.killed

        def kill(self):
            self.killed = True

    monkeypatch.setattr(stop_deadline, "KILL_AFTER_MS", 200)
    client = experiment_client.ExperimentClient()
    runner = client.runner = DeafRunner()
    client._thread = object()       # as if its thread were running
    with qtbot.waitSignal(client.sigKilled, timeout=5_000):
        client.stop()
    assert runner.killed and runner.stops >= 1
    client._thread = None
