"""A rank killed mid-run: the run fails fast, names the rank, leaves nothing behind, keeps its steps."""
from __future__ import annotations

import signal
import subprocess
import time

import psutil

from engine.results import Step
from engine.store import Store
from helpers import start_cli
from procs import tagged_processes


def rank_processes() -> list[psutil.Process]:
    return [p for p in tagged_processes() if "engine.run.rank" in " ".join(p.cmdline())]


def test_sigkill_of_a_rank_fails_the_run_naming_it(fresh_store):
    proc = start_cli("run", "--strategy", "ddp", "--devices", "cpu:2", "--model", "mlp", "--width", "256", "--depth",
                     "4", "--batch-size", "256", "--steps", "100000", "--warmup", "0", stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    try:
        # Progress lines on stderr tell us steps are running.
        for line in proc.stderr:
            if line.startswith("step "):
                break
        # A rank forked by the fork server says which it is in its command line (its environment in /proc is
        # the server's); one started fresh, in its environment.
        victims = [p for p in rank_processes() if "(rank 1 of 2 on cpu:1)" in " ".join(p.cmdline())
                   or p.environ().get("RANK") == "1"]
        assert len(victims) == 1
        killed_at = time.monotonic()
        victims[0].send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=15)
        assert time.monotonic() - killed_at < 15
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    assert "rank 1" in err and "SIGKILL" in err, err
    assert rank_processes() == []
    with Store(fresh_store) as store:
        (run,) = store.list_runs()
        assert run.status == "failed"
        assert "rank 1" in run.error
        assert len(store.steps(run.id)) >= 1


def test_stop_ends_the_run_within_3_seconds(fresh_store):
    import threading

    from engine.config import ExperimentConfig
    from engine.run.session import RunSession
    first_step = threading.Event()
    config = ExperimentConfig(strategy="pipeline", devices="cpu:2", model="mlp", width=128, depth=4,
                              batch_size=128, steps=100000, warmup=0, micro_batches=4)
    session = RunSession(config, on_event=lambda e: isinstance(e, Step) and first_step.set())
    session.start()
    assert first_step.wait(60)
    asked = time.monotonic()
    session.stop()
    result = session.wait(10)
    assert result is not None and result.status == "stopped"
    assert time.monotonic() - asked < 10   # the worker promises 3 s: a stop honoured, not the kill after it
    with Store(fresh_store) as store:
        assert store.get_run(result.run_id).status == "stopped"
        assert store.steps(result.run_id)
