"""The store process (engine/store/server.py): the app's SQLite connections where nothing else opens the store's
files. On Linux, closing any descriptor of a file drops every POSIX lock the process holds on it; a process
holding a store that opened its file once more lost its locks, and others deleted the log under it."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import psutil
import pytest

from engine.results import RunSummary, Step
from engine.store import RemoteStore, Store, StoreUnavailable, open_store, serve_from_child, store_process_pid
from procs import ROOT
from store_helpers import locks_held, read_elsewhere, write_runs_elsewhere

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


@pytest.fixture
def served():
    serve_from_child(True)
    yield
    serve_from_child(False)


def test_a_store_held_as_the_app_holds_it_loses_nothing_when_its_file_is_opened_and_closed_beside_it(
        served, fresh_store):
    holder = open_store(fresh_store)
    assert isinstance(holder, RemoteStore)
    ours = [holder.create_run({"n": 1}), holder.create_run({"n": 2})]
    # What Qt's file dialog did to learn the file's type; here it drops no lock, for this process holds none.
    os.close(os.open(fresh_store, os.O_RDONLY))
    assert locks_held(os.getpid(), fresh_store) == []
    assert locks_held(store_process_pid(), fresh_store), "the store process holds the store's locks"
    theirs = write_runs_elsewhere(fresh_store, 2)
    ours.append(holder.create_run({"n": 5}))
    holder.add_samples(ours[-1], [{"t": 0.1 * k, "device": "cpu:0", "util": 50.0} for k in range(100)])
    ids, ok = read_elsewhere(fresh_store)
    assert ids == set(ours + theirs) and ok
    holder.close()
    ids, ok = read_elsewhere(fresh_store)
    assert ids == set(ours + theirs) and ok
    with Store(fresh_store) as store:
        assert store.sample_span(ours[-1])[0] == 100


def test_a_store_opened_here_holds_the_locks_that_such_an_open_drops(fresh_store):
    """Why the app's stores live in the store process: the hazard, shown on this machine's kernel."""
    with Store(fresh_store) as store:
        store.create_run({})
        before = locks_held(os.getpid(), fresh_store)
        os.close(os.open(fresh_store, os.O_RDONLY))
        after = locks_held(os.getpid(), fresh_store)
    assert before and not after


def test_a_remote_store_answers_as_the_store_does_and_raises_what_it_raises(served, fresh_store):
    with open_store(fresh_store) as remote:
        run_id = remote.create_run({"strategy": "single"})
        remote.add_steps(run_id, [Step(step=k, t=0.1 * k, time_s=0.1, busy={"cpu:0": 0.5},
                                       intervals={"cpu:0": [["forward", 0.1 * k, 0.1 * k + 0.05]]})
                                  for k in range(4)], kept_steps={1, 3})
        remote.finish_run(run_id, "finished", RunSummary(strategy="single", steps=4))
        with pytest.raises(ValueError, match="status must be one of"):
            remote.finish_run(run_id, "exploded")
        with pytest.raises(AttributeError):
            remote.nothing_like_this  # noqa: B018
        with pytest.raises(sqlite3.IntegrityError):   # an experiment that does not exist
            remote.create_run({}, experiment_id="exp-nowhere")
        answers = (remote.get_run(run_id), remote.steps(run_id), remote.timeline_steps(run_id), remote.path)
    with Store(fresh_store) as local:
        assert answers == (local.get_run(run_id), local.steps(run_id), local.timeline_steps(run_id), local.path)
    assert answers[2] == [1, 3]


def test_a_store_process_that_ended_fails_the_call_it_was_in_and_the_next_call_starts_another(served, fresh_store):
    with open_store(fresh_store) as store:
        run_id = store.create_run({})
        first = store_process_pid()
        os.kill(first, signal.SIGKILL)
        psutil.Process(first).wait(10)
        with pytest.raises(StoreUnavailable, match="store process ended"):
            store.get_run(run_id)
        # The new store process opens the store again; the run belongs to this process, which lives, so it is
        # not marked interrupted (it was, when runs were recorded as the store process's).
        assert store.get_run(run_id).status == "running"
        assert store_process_pid() not in (None, first)
    with Store(fresh_store) as local:
        assert local._db.execute("SELECT owner_pid FROM runs WHERE id=?", (run_id,)).fetchone()[0] == os.getpid()


def test_the_store_process_ends_with_the_process_that_started_it(fresh_store):
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys, time
        from engine.store import open_store, serve_from_child, store_process_pid
        serve_from_child()
        store = open_store({str(fresh_store)!r})
        store.create_run({{}})
        print(store_process_pid(), flush=True)
        time.sleep(600)""")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        server = psutil.Process(int(owner.stdout.readline()))
        assert server.is_running()
    finally:
        owner.kill()
        owner.wait()
    server.wait(10)   # psutil.TimeoutExpired fails the test with the pid still alive
    with Store(fresh_store) as store:
        assert len(store.list_runs()) == 1
