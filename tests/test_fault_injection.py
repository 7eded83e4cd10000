"""Faults injected into real runs (issue 6): each ends with a clear error naming the cause,
keeps the steps so far, leaves the store intact and leaves no process behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

import faulty_models
from engine.config import ExperimentConfig
from engine.results import Step
from engine.run.session import RunSession
from engine.store import Store
from procs import ROOT, tagged_processes

RUN_THREAD_PREFIXES = ("run-session", "worker-stdout", "worker-stderr", "telemetry-sampler")


@pytest.fixture(autouse=True)
def no_run_threads_left():
    yield
    leftover = [t for t in threading.enumerate() if t.name.startswith(RUN_THREAD_PREFIXES)]
    for t in leftover:
        t.join(timeout=5)
    assert [t.name for t in leftover if t.is_alive()] == []


def run_to_end(config: ExperimentConfig, timeout: float = 90):
    session = RunSession(config)
    session.start()
    result = session.wait(timeout)
    assert result is not None, "the run did not end"
    return result


def assert_failed_and_kept(db, result, *needles):
    assert result.status == "failed"
    for needle in needles:
        assert needle in result.error, result.error
    with Store(db) as store:
        run = store.get_run(result.run_id)
        assert run.status == "failed" and run.error == result.error
        assert len(store.steps(run.id)) >= 2          # the steps before the fault
        assert store.integrity_ok()


@pytest.mark.parametrize("strategy,devices", [("single", "cpu:1"), ("pipeline", "cpu:2")])
def test_exception_in_a_user_model_at_step_k(fresh_store, tmp_path, strategy, devices):
    path = faulty_models.write("raise", tmp_path, at_step=3)
    config = ExperimentConfig(strategy=strategy, model_file=str(path), model="custom", devices=devices,
                              batch_size=8, steps=50, warmup=0, micro_batches=1 if strategy == "pipeline" else None)
    result = run_to_end(config)
    assert_failed_and_kept(fresh_store, result, "rank 0", "ValueError", "user model broke at step 4")
    assert "faulty_raise.py" in result.traceback


def test_out_of_memory_inside_a_step(fresh_store, tmp_path):
    path = faulty_models.write("oom", tmp_path, at_step=3)
    config = ExperimentConfig(model_file=str(path), model="custom", devices="cpu:1", batch_size=8, steps=50,
                              warmup=0)
    result = run_to_end(config)
    assert_failed_and_kept(fresh_store, result, "out of memory", "--batch-size")


def test_a_hung_rank_is_ended_by_the_watchdog(fresh_store, tmp_path):
    path = faulty_models.write("hang", tmp_path, at_step=3)
    config = ExperimentConfig(strategy="ddp", model_file=str(path), model="custom", devices="cpu:2", batch_size=8,
                              steps=50, warmup=0, hang_timeout_s=3.0)
    started = time.monotonic()
    result = run_to_end(config, timeout=60)
    assert time.monotonic() - started < 45
    assert_failed_and_kept(fresh_store, result, "hung", "3 s")


def test_sigkill_of_the_worker(fresh_store):
    first_step = threading.Event()
    config = ExperimentConfig(strategy="pipeline", devices="cpu:2", model="mlp", width=64, depth=4, batch_size=64,
                              steps=100000, warmup=0, micro_batches=2)
    session = RunSession(config, on_event=lambda e: isinstance(e, Step) and first_step.set())
    session.start()
    assert first_step.wait(60)
    assert [name for name in os.listdir(session.folder) if name.startswith("splitscope-rdzv-")]   # the ranks' file
    os.kill(session.pid, signal.SIGKILL)
    result = session.wait(20)
    assert result.status == "failed" and "SIGKILL" in result.error and "worker" in result.error
    # the ranks notice their worker is gone (parent-death signal, closed stdin) and end
    _, alive = psutil.wait_procs(tagged_processes(), timeout=10)
    assert alive == []
    with Store(fresh_store) as store:
        assert store.get_run(result.run_id).status == "failed"
        assert store.steps(result.run_id)
    assert not os.path.exists(session.folder)   # the rendezvous file the killed worker could not remove


def test_sigkill_of_the_app_mid_run(fresh_store):
    # A stand-in for the app: a process that runs a session, killed without warning.
    app = textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {str(ROOT)!r})
        from engine.config import ExperimentConfig
        from engine.results import Step
        from engine.run.session import RunSession
        first = threading.Event()
        config = ExperimentConfig(strategy="ddp", devices="cpu:2", model="mlp", width=64, depth=4, batch_size=64,
                                  steps=100000, warmup=0)
        s = RunSession(config, on_event=lambda e: isinstance(e, Step) and first.set())
        s.start()
        first.wait(60)
        print(s.run_id, s.folder, flush=True)
        threading.Event().wait()
    """)
    proc = subprocess.Popen([sys.executable, "-c", app], stdout=subprocess.PIPE, text=True)
    run_id, folder = proc.stdout.readline().split()
    assert os.path.isdir(folder)
    proc.kill()
    proc.wait()
    _, alive = psutil.wait_procs(tagged_processes(), timeout=15)
    assert alive == [], [p.cmdline() for p in alive]
    for _ in range(100):   # the worker, its session gone, removes the run's folder itself as it ends
        if not os.path.exists(folder):
            break
        time.sleep(0.1)
    assert not os.path.exists(folder), [str(path) for path in Path(folder).rglob("*")]
    with Store(fresh_store) as store:  # the next start finds the run and marks it
        run = store.get_run(run_id)
        assert run.status == "interrupted"
        assert store.steps(run_id)
        assert store.integrity_ok()
