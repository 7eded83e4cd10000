"""A run that outlives its store process (issue 52): the writes the store had not acknowledged are sent again to
a new one, nothing stored twice, nothing lost; and a store that fails a write still gets the run's end, with
its error, when it can take it."""
from __future__ import annotations

import os
import signal
import sqlite3
import threading

import psutil
import pytest

import engine.run.session
from engine.config import ExperimentConfig
from engine.events import Warned
from engine.record import timeline_keeper
from engine.record.recorder import RunRecorder
from engine.results import RunSummary, Step
from engine.run.session import STORE_RESTARTED, RunSession
from engine.store import Store, StoreUnavailable, client, serve_from_child, store_process_pid
from engine.store.client import StoreRestarts
from engine.telemetry.sample import DeviceSample

WRITES = ("add_steps", "add_samples", "replace_timeline", "thin_samples", "add_profile")


class CutShort:
    """A Store whose ``cut``-th write (counted from 0) raises StoreUnavailable, as a store process killed in it:
    ``committed`` says whether it was killed after its transaction committed or before it began."""

    def __init__(self, store: Store, cut: int | None = None, committed: bool = False):
        self.store, self.cut, self.committed, self.writes = store, cut, committed, 0
        self.names: list[str] = []

    def __getattr__(self, name):
        method = getattr(self.store, name)
        if name not in WRITES:
            return method

        def write(*args, **kwargs):
            n, self.writes = self.writes, self.writes + 1
            self.names.append(name)
            if n == self.cut and not self.committed:
                raise StoreUnavailable(f"the store process ended during {name}")
            value = method(*args, **kwargs)
            if n == self.cut:
                raise StoreUnavailable(f"the store process ended during {name}")
            return value
        return write


def _record_a_run(db, cut=None, committed=False):
    """60 steps in batches of 5 over 750 run seconds (recent steps rewritten, samples thinned, every write kind
    made), recorded through a store cut short at one write; each write that raised is sent again, as
    RunSession does (StoreRestarts). What the store then holds, and the recorder's totals."""
    origin = 1000.0
    with Store(db) as real:
        run_id = real.create_run({})
        store = CutShort(real, cut, committed)
        recorder = RunRecorder(store, run_id, origin, timeline="sampled", warmup=2, device_names=["cpu:0"],
                               telemetry_hz=0.4)
        restarts = StoreRestarts(limit=1000)
        timelines = []
        for first in range(0, 60, 5):
            steps = [Step(step=k, t=12.5 * (k + 1), time_s=12.0, samples=8, loss=1.0 / (k + 1),
                          busy={"cpu:0": 0.9}, intervals={"cpu:0": [["forward", 12.5 * k, 12.5 * k + 6.0],
                                                                    ["backward", 12.5 * k + 6.0, 12.5 * (k + 1)]]})
                     for k in range(first, first + 5)]
            samples = [DeviceSample(t=origin + step.t - 6.0 + half, device="cpu:0", util=50.0 + half,
                                    mem_used=1000 + step.step) for step in steps for half in (0.0, 6.0)]
            restarts.write(lambda steps=steps, samples=samples: recorder.record(steps, samples), recorder.resend)
            timelines.append(sorted(real.timeline(run_id)))   # as a run that ends here, unfinished, leaves it
        restarts.write(lambda: recorder.add_profile(0, "cpu:0", 1.5, b"{}"),
                       lambda: recorder.add_profile(0, "cpu:0", 1.5, b"{}", again=True))
        restarts.write(recorder.finish)
        stored = (real.steps(run_id), sorted(real.timeline(run_id)), real.samples(run_id),
                  [p[:3] for p in real.profiles(run_id)], timelines)
        totals = (recorder.steps, recorder.timeline_kept, recorder.telemetry_summary(None, ["cpu:0"]))
        return stored, totals, store.names


@pytest.mark.quick
def test_a_write_cut_short_before_or_after_its_commit_and_sent_again_stores_the_same_as_none_cut(
        tmp_path, monkeypatch):
    # Fewer steps kept for good than the keeper keeps in a real run, so 60 steps leave some to the recent ones.
    monkeypatch.setattr(timeline_keeper, "FIRST", 20)
    monkeypatch.setattr(timeline_keeper, "PER_OCTAVE", 10)
    stored, totals, writes = _record_a_run(tmp_path / "whole.sqlite3")
    steps, timeline, samples, profiles, _ = stored
    assert len(steps) == 60 and profiles == [(0, "cpu:0", 1.5)] and totals[0] == 60
    assert {row[0] for row in timeline} == set(range(60)) and totals[1] == 60   # the recent ones kept at the end
    assert writes.count("replace_timeline") > 5 and writes.count("thin_samples") > 5   # each write kind made
    assert any(s.span_s is not None for s in samples) and any(s.span_s is None for s in samples)
    for cut in range(len(writes)):
        for committed in (False, True):
            again = _record_a_run(tmp_path / f"cut-{cut}-{committed}.sqlite3", cut, committed)
            assert again[:2] == (stored, totals), (cut, committed)


@pytest.mark.quick
def test_the_store_process_ending_too_often_fails_the_write_and_saying_so():
    told = []
    restarts = StoreRestarts(lambda: told.append(True), limit=2, window_s=60.0)
    calls = []

    def ends_twice():
        calls.append(True)
        if len(calls) <= 2:
            raise StoreUnavailable("the store process ended during add_steps")
        return "stored"
    assert restarts.write(ends_twice) == "stored" and told == [True]

    def ends_always():
        raise StoreUnavailable("the store process ended during add_steps")
    with pytest.raises(StoreUnavailable, match=r"ended during add_steps \(it ended 3 times in 60 s\)"):
        restarts.write(ends_always)
    assert told == [True]


@pytest.mark.quick
def test_a_write_that_finds_the_store_process_replaced_while_it_was_idle_says_so(monkeypatch):
    """Another store's call found the process ended and started the next: this writer had nothing in flight,
    and its next write still tells the window the process ended."""
    told = []
    restarts = StoreRestarts(lambda: told.append(True))
    restarts.write(lambda: None)
    assert told == []
    monkeypatch.setattr(client._process, "generation", client._process.generation + 1)
    restarts.write(lambda: None)
    restarts.write(lambda: None)
    assert told == [True]


@pytest.fixture
def served():
    serve_from_child(True)
    yield
    serve_from_child(False)


def test_a_run_whose_store_process_is_killed_mid_run_finishes_with_every_step_stored(served, fresh_store):
    config = ExperimentConfig(model="seed-toy", devices="cpu:1", steps=600, warmup=0)
    events = []
    stepping = threading.Event()

    def on_event(event):
        events.append(event)
        if isinstance(event, Step) and event.step >= 3:
            stepping.set()
    session = RunSession(config, db_path=fresh_store, telemetry_hz=50, on_event=on_event)
    session.start()
    assert stepping.wait(60), "no step within 60 s"
    killed = store_process_pid()
    os.kill(killed, signal.SIGKILL)
    seen = max(e.step for e in list(events) if isinstance(e, Step))
    result = session.wait(120)
    assert result is not None and result.status == "finished", result and result.error
    assert seen < config.steps - 1   # killed mid-run
    assert [e.message for e in events if isinstance(e, Warned)].count(STORE_RESTARTED) == 1
    assert store_process_pid() not in (None, killed) and not psutil.pid_exists(killed)
    with Store(fresh_store) as store:
        assert store.step_count(result.run_id) == result.summary.steps == config.steps
        assert [s.step for s in store.steps(result.run_id)] == list(range(config.steps))
        rows = store.timeline(result.run_id)
        assert len(rows) == len(set(rows))   # no interval stored twice
        samples = [(s.t, s.device) for s in store.samples(result.run_id)]
        assert len(samples) == len(set(samples))
        assert store.get_run(result.run_id).status == "finished"


def test_a_run_end_that_does_not_fit_is_stored_as_failed_with_the_error_alone(fresh_store):
    """The run's row told why it failed when its summary would not fit: a row left "running" is marked
    interrupted by the next open, and the error is lost."""
    ends = []

    class Full:
        path = fresh_store

        def finish_run(self, run_id, status, summary=None, error=None, traceback=None):
            if summary is not None:
                raise sqlite3.OperationalError("database or disk is full")
            ends.append((run_id, status, error))
    session = RunSession(ExperimentConfig(model="seed-toy", devices="cpu:1", steps=2))
    session.run_id = "a-run"
    status, error = session._store_end(Full(), "finished", RunSummary(strategy="single"), None, None)
    assert (status, error) == ("failed", f"cannot write the run store {fresh_store}: database or disk is full")
    assert ends == [("a-run", "failed", error)]


def test_a_store_full_mid_run_still_stores_the_run_as_failed_with_its_error(fresh_store, monkeypatch):
    """A store that refuses to grow (SQLite's page limit: a full disk, as SQLite sees it): the batch's write
    fails, then the run's end is stored with the error, without the summary when that will not fit."""
    real_open = engine.run.session.open_store

    def full_soon(path=None):
        store = real_open(path)
        if threading.current_thread().name.startswith("run-session"):
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(f"PRAGMA max_page_count = {pages + 16}")
        return store
    monkeypatch.setattr(engine.run.session, "open_store", full_soon)
    config = ExperimentConfig(model="seed-toy", devices="cpu:1", steps=10_000_000, warmup=0)
    session = RunSession(config, db_path=fresh_store, telemetry_hz=0)   # steps alone fill it, some stored first
    session.start()
    result = session.wait(120)
    assert result is not None and result.status == "failed" and result.store_failed
    assert "cannot write the run store" in result.error and "database or disk is full" in result.error
    with Store(fresh_store) as store:
        stored = store.get_run(result.run_id)
        assert stored.status == "failed" and stored.error == result.error
        assert store.step_count(result.run_id) > 0 and store.integrity_ok()
