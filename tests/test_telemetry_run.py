"""Telemetry recorded with a run, measured by the OS outside the worker (issue 3: "Must show")."""
from __future__ import annotations

import pytest

from engine.store import Store
from helpers import cli

MLP = ["--model", "mlp", "--width", "512", "--depth", "8", "--batch-size", "2048", "--steps", "20",
       "--devices", "cpu:2", "--json"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("telemetry") / "runs.sqlite3")
    _, naive = cli("run", *MLP, "--strategy", "model-parallel", "--db", db, check_json=True, timeout=300)
    _, piped = cli("run", *MLP, "--strategy", "pipeline", "--micro-batches", "4", "--db", db, check_json=True,
                   timeout=300)
    return db, naive, piped


def test_naive_split_devices_are_busy_about_half_the_time(runs):
    _, naive, _ = runs
    util = naive["telemetry"]["util_mean"]
    # Here 50-57; a loaded CI machine read 58.9 where the engine timed 46.1: the core also runs what else is
    # ready when the rank waits (see the next-but-one test).
    assert all(35 <= u <= 70 for u in util), util


def test_pipeline_raises_each_device_by_ten_points(runs):
    _, naive, piped = runs
    for before, after in zip(naive["telemetry"]["util_mean"], piped["telemetry"]["util_mean"]):
        assert after >= before + 10, (naive["telemetry"], piped["telemetry"])


def test_the_engines_busy_share_agrees_with_the_oss_reading(runs):
    """Two independent readings of one thing: the engine's timers and the kernel's tick counters of the core.
    The core's counters also count whatever else ran there: the pipelining library's Python between the
    timed spans, and on a shared machine the coordinator and other tenants, which the scheduler puts on
    whichever core is idle (here 0.6 to 6 points above the engine; 12.8 once on CI, 47 with a second suite
    running). So the OS may read higher by a load-dependent margin, but never much lower: a timer that counted
    a wait as busy would. How much higher is the machine's, not a behaviour."""
    _, naive, piped = runs
    for summary in (naive, piped):
        devices, gaps = summary["devices"], []
        for util, busy in zip(summary["telemetry"]["util_mean"], summary["devices_busy"]):
            gaps.append(util - 100 * busy)
        assert all(gap >= -5 for gap in gaps), (summary["strategy"], summary["telemetry"], summary["devices_busy"])
        assert all(0 <= util <= 100.5 for util in summary["telemetry"]["util_mean"]), summary["telemetry"]
        # The summary names exactly the devices more than 10 points apart.
        flagged = [name for name, gap in zip(devices, gaps) if abs(gap) > 10]
        note = summary["telemetry"]["disagreement"] or ""
        assert [name for name in devices if note.startswith(f"{name}:") or f"; {name}:" in note] == flagged, note


def test_every_device_has_nine_samples_per_second_of_run(runs):
    db, naive, _ = runs
    with Store(db) as store:
        run = store.get_run(naive["run_id"])
        samples = store.samples(run.id)
        steps = store.steps(run.id)
    start, end = steps[0].t - steps[0].time_s, steps[-1].t
    for device in naive["devices"]:
        in_run = [s for s in samples if s.device == device and start <= s.t <= end]
        assert len(in_run) >= 9 * (end - start), (device, len(in_run), end - start)
    assert naive["telemetry"]["samples"] == len(samples)
    assert naive["telemetry"]["rate_hz"] == 10


def test_each_rank_memory_is_followed_from_its_launch(runs):
    """The `launched` event names the rank processes at once: their RSS is read as it comes (engine/
    telemetry/sampler.py set_pid), while they build the model and join the group, and it grows as they do."""
    db, naive, _ = runs
    with Store(db) as store:
        samples = store.samples(naive["run_id"])
        first = store.steps(naive["run_id"])[0]
    for device in naive["devices"]:
        rss = [(s.t, s.mem_used) for s in samples if s.device == device and s.mem_used is not None]
        assert rss and rss[0][0] < first.t, (device, rss[:3], first)  # read before the first step was done
        # The model, its gradients and 2048-sample batches: tens of MB on top of torch's hundreds.
        assert max(m for _, m in rss) - min(m for _, m in rss) > 20 * 2**20, (device, rss)
