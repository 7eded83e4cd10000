"""The app's run outlives its store process (issue 52): SIGKILL the store process mid-run, the run finishes, every
step is stored once, and the window says so in one line."""
from __future__ import annotations

import os
import signal

import psutil

from engine.run.session import STORE_RESTARTED
from engine.store import store_process_pid
from tests.app.app_helpers import set_small_mlp, wait_ready, wait_steps

STEPS = 600   # about a second of the small model: the kill lands in the middle


def test_the_store_process_killed_mid_run_the_run_finishes_with_every_step_stored(qtbot, window):
    set_small_mlp(window, strategy="single", devices="cpu:1", steps=STEPS)
    wait_ready(qtbot, window, profiled=False)
    with qtbot.waitSignal(window.sigRunFinished, timeout=60_000) as finished:
        window.run_action.trigger()
        wait_steps(qtbot, window, 3)
        killed, seen = store_process_pid(), window.plots.progress.steps_done
        os.kill(killed, signal.SIGKILL)
    result = finished.args[0]
    assert seen < STEPS   # killed mid-run
    assert result.status == "finished", result.error
    assert result.summary.steps == STEPS
    log = window.log_view.toPlainText()
    said = [line.split("  ", 1)[1] for line in log.splitlines() if STORE_RESTARTED in line]   # after its time
    assert said == [f"warning: {STORE_RESTARTED}"], log
    assert "Finished" in window.status_label.text()
    assert store_process_pid() not in (None, killed) and not psutil.pid_exists(killed)
    # Read through the window's own store, which was idle when its process was killed: it opens on the new one.
    store = window.store
    assert store.get_run(result.run_id).status == "finished"
    assert [s.step for s in store.steps(result.run_id)] == list(range(STEPS))
    rows = store.timeline(result.run_id)
    assert rows and len(rows) == len(set(rows))   # no interval stored twice
    samples = [(s.t, s.device) for s in store.samples(result.run_id)]
    assert samples and len(samples) == len(set(samples))
    assert window.history.records[0].id == result.run_id and window.history.records[0].status == "finished"
