"""Long runs in bounded memory and a bounded store (an hour or a day of training must not end in an OOM kill).

The worker used to keep every merged step and the session every step and sample,
both growing by about 18 KB a step; the store grew by 8 KB a step. Now the summary
comes from running totals, the store keeps every step's row but only a sample of
the timelines, and old telemetry is thinned.
"""
from __future__ import annotations

import math
import os
import sqlite3
import statistics
import subprocess
import time

import psutil
import pytest

from engine.config import ExperimentConfig
from engine.figures.timeline import TIMELINE_STEPS
from engine.record.timeline_keeper import FIRST, LAST
from engine.results import Step
from engine.run.session import RunSession
from engine.store import Store
from helpers import start_cli

pytestmark = pytest.mark.timeout(600)
MB = 2 ** 20
# As long as the assertions need: past three octaves of the timeline's sample and its outliers, and 18 KB a step
# of growth (the old leak) would be 180 MB by the end. An hour of a small pipeline is what `make bench` runs.
# (30,000 steps until 2026-12-07: 2.5 times the CPU for the same assertions.)
STEPS = 12_000


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    """12,000 steps of a 2-stage, 8-micro-batch pipeline from torch-free ranks (tests/synthetic_rank.py),
    through the real worker (its merge and totals), session (store, telemetry) and store."""
    db = tmp_path_factory.mktemp("long") / "runs.sqlite3"
    steps = STEPS
    me = psutil.Process()
    rss: dict[str, dict[int, float]] = {"session": {}, "worker": {}}
    session = None

    def on_event(event):
        if not isinstance(event, Step):
            return
        for mark in (2_000, steps - 1):
            if event.step >= mark and mark not in rss["session"]:
                rss["session"][mark] = me.memory_info().rss / MB
                rss["worker"][mark] = psutil.Process(session.pid).memory_info().rss / MB

    config = ExperimentConfig(strategy="pipeline", devices="cpu:2", steps=steps, warmup=2, micro_batches=8,
                              batch_size=256)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPLITSCOPE_RANK_MODULE", "tests.synthetic_rank")
        session = RunSession(config, db_path=db, on_event=on_event)
        session.start()
    try:
        result = session.wait(540)
    finally:
        if session.is_running():  # nothing left behind, even when the run outlives the wait
            session.kill()
            session.wait(10)
    assert result is not None and result.status == "finished", result and result.error
    return db, result, rss


def test_a_long_run_leaves_the_session_and_worker_memory_flat(synthetic_run):
    _, result, rss = synthetic_run
    assert result.summary.steps == STEPS
    # Measured at 200,000 steps: session 26.2 -> 28.3 MB from step 2,000 to the last (was about 18 KB a step).
    grew = {name: marks[STEPS - 1] - marks[2_000] for name, marks in rss.items()}
    assert grew["session"] < 20 and grew["worker"] < 10, rss


def test_the_store_keeps_every_step_and_a_bounded_sample_of_timelines(synthetic_run):
    db, result, _ = synthetic_run
    assert os.path.getsize(db) < 15 * MB  # 37.8 MB at 200,000 steps (was 8 KB a step: 96 MB at 12,000)
    with Store(db) as store:
        assert store.step_count(result.run_id) == STEPS
        kept = set(store.timeline_steps(result.run_id))
    assert set(range(FIRST)) <= kept and set(range(STEPS - LAST, STEPS)) <= kept
    assert {999, 5_999, 9_999} <= kept  # the slow steps (every 1000th), far from their neighbours' time
    assert len(kept) < 2_000, len(kept)


def test_a_sampled_runs_summary_equals_the_one_computed_from_all_its_steps(synthetic_run):
    db, result, _ = synthetic_run
    with Store(db) as store:
        steps = [s for s in store.steps(result.run_id) if s.step >= 2]
    summary = result.summary
    times = [s.time_s for s in steps]
    assert summary.step_time_s.mean == pytest.approx(statistics.fmean(times), rel=1e-9)
    assert summary.step_time_s.std == pytest.approx(statistics.stdev(times), rel=1e-6)
    # samples over time, not a mean of per-step rates
    assert summary.throughput.mean == pytest.approx(sum(s.samples for s in steps) / sum(times), rel=1e-9)
    assert summary.throughput.std == pytest.approx(statistics.stdev(s.throughput for s in steps), rel=1e-6)
    total = math.fsum(times)
    for device, share in zip(summary.devices, summary.devices_busy, strict=True):
        stored = math.fsum(s.busy[device] * s.time_s for s in steps) / total
        assert share == pytest.approx(stored, abs=1e-6)  # stored shares keep 6 decimals


def test_a_real_3500_step_run_keeps_the_cli_and_worker_memory_flat(tmp_path):
    """The old leak (18 KB a step) would be 27 MB over the 1,500 steps read here at least."""
    db = tmp_path / "runs.sqlite3"
    proc = start_cli("run", "--model", "seed-toy", "--strategy", "data-parallel", "--devices", "cpu:2", "--steps",
                     "3500", "--db", str(db), "--json", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cli = psutil.Process(proc.pid)
    rss: dict[str, list[tuple[int, float]]] = {"cli": [], "worker": []}
    torch_mapped = False
    try:
        while proc.poll() is None:
            time.sleep(0.5)
            try:
                with sqlite3.connect(db, timeout=1) as con:
                    step = con.execute("SELECT MAX(step) FROM steps").fetchone()[0] or 0
                worker = next(p for p in cli.children() if "engine.run.worker" in " ".join(p.cmdline()))
                memory = (cli.memory_info().rss / MB, worker.memory_info().rss / MB)
                torch_mapped = torch_mapped or any("libtorch" in m.path for m in cli.memory_maps())
            except (sqlite3.Error, StopIteration, psutil.NoSuchProcess):
                continue
            if step >= 1_000:
                rss["cli"].append((step, memory[0]))
                rss["worker"].append((step, memory[1]))
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for name, readings in rss.items():
        assert readings and readings[-1][0] >= 2_500, readings
        first = readings[0][1]
        assert max(mb for _, mb in readings) - first < 10, (name, readings[0], readings[-1])
    # The command line only supervises: validation imported torch in a child that is gone (it held
    # about 500 MB for the whole run before).
    assert max(mb for _, mb in rss["cli"]) < 100, rss["cli"][-1]
    assert not torch_mapped, "the command line's process loaded libtorch"


def test_exports_of_a_sampled_run_say_which_steps_kept_their_timelines(synthetic_run, monkeypatch):
    from engine.export import figures as export_figures
    db, result, _ = synthetic_run
    # The exports hold at most EXPORT_ROWS (100,000) step rows; half the run's steps here.
    monkeypatch.setattr(export_figures, "EXPORT_ROWS", STEPS // 2)
    with Store(db) as store:
        figures = {f.name: f for f in export_figures.run_figures(store, result.run_id)}
    timeline = figures["timeline"]
    assert "full timelines kept for" in timeline.title and f"of {STEPS:,} steps" in timeline.title
    assert {row[0] for row in timeline.rows} == set(range(STEPS - TIMELINE_STEPS, STEPS))
    # The step figures hold every 2nd step (and the last), and say so in their titles, drawings and CSV alike.
    from engine.export import drawing
    throughput = figures["throughput"]
    assert f"(1 step in 2 of {STEPS:,})" in throughput.title
    assert f"Throughput per step (1 step in 2 of {STEPS:,})" in drawing.draw(throughput, "svg").decode()
    assert len(throughput.rows) == STEPS // 2 + 1  # steps 0, 2, ..., STEPS - 2 and the last


@pytest.mark.parametrize("mode", ["sampled", "all"])
def test_the_timeline_option_keeps_a_sample_or_every_step(tmp_path, monkeypatch, mode):
    from engine.record import timeline_keeper
    monkeypatch.setattr(timeline_keeper, "OUTLIERS_PER_OCTAVE", 0)  # sub-millisecond steps: outliers by the dozen
    db = tmp_path / "runs.sqlite3"
    config = ExperimentConfig(model="seed-toy", devices="cpu:1", steps=700, warmup=0, timeline=mode)
    session = RunSession(config, db_path=db, telemetry_hz=10)
    session.start()
    result = session.wait(120)
    assert result.status == "finished"
    with Store(db) as store:
        kept = store.timeline_steps(result.run_id)
        assert store.step_count(result.run_id) == 700
    if mode == "all":
        assert kept == list(range(700))
    else:  # the first 200, every 2nd step from 200, every 4th from 400, and the last 200 of the others
        for_good = set(range(200)) | set(range(200, 400, 2)) | set(range(400, 700, 4))
        last_others = sorted(set(range(700)) - for_good)[-200:]
        assert set(kept) == for_good | set(last_others)
        assert result.summary.timeline_steps == len(kept) == 575


def test_outliers_are_kept_in_every_octave_of_a_long_run_not_only_its_first():
    """Every 10th step slow for 2**16 steps: each doubling of the run keeps up to its own budget of them."""
    from engine.record.timeline_keeper import OUTLIERS_PER_OCTAVE, TimelineKeeper
    keeper = TimelineKeeper("sampled")
    slow = [k for k in range(2 ** 16) if keeper.keep(Step(step=k, time_s=0.03 if k % 10 == 9 else 0.01))
            and k % 10 == 9 and k >= FIRST]   # odd steps past FIRST: never in the even sample
    by_octave = {}
    for k in slow:
        by_octave[k.bit_length()] = by_octave.get(k.bit_length(), 0) + 1
    assert max(by_octave.values()) <= OUTLIERS_PER_OCTAVE
    assert by_octave[16] == OUTLIERS_PER_OCTAVE  # the last octave (32,768 to 65,535) too


def test_old_telemetry_is_thinned_to_bucket_means_and_maxima(tmp_path):
    with Store(tmp_path / "runs.sqlite3") as store:
        run_id = store.create_run({"strategy": "single"})
        store.add_samples(run_id, [{"t": 0.1 * i, "device": "cpu:0", "util": float(i % 10), "mem_used": i}
                                   for i in range(300)])          # 30 s at 10 Hz
        assert store.thin_samples(run_id, before_t=20.0, bucket_s=1.0) == 200 - 20
        rows = store.samples(run_id)
        old = [r for r in rows if r.span_s == 1.0]
        assert len(old) == 20 and len(rows) == 20 + 100
        assert old[0].t == pytest.approx(0.5) and old[0].util == pytest.approx(4.5)
        assert old[-1].mem_used == 199                               # the bucket's most memory
        assert store.thin_samples(run_id, before_t=20.0, bucket_s=1.0) == 0  # already as coarse
        assert store.thin_samples(run_id, before_t=20.0, bucket_s=10.0) == 18
