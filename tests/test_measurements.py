"""What the engine measures: busy fractions, bubbles, per-device batch sizes."""
from __future__ import annotations

import pytest

from helpers import cli

# Big enough that compute dominates the per-micro-batch overheads, small enough for CI.
MLP = ["--model", "mlp", "--width", "512", "--depth", "8", "--batch-size", "1024", "--steps", "8", "--warmup", "2",
       "--devices", "cpu:2", "--json"]


@pytest.fixture(scope="module")
def naive_and_pipeline(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("bubble") / "runs.sqlite3")
    _, naive = cli("run", *MLP, "--strategy", "model-parallel", "--db", db, check_json=True)
    _, piped = cli("run", *MLP, "--strategy", "pipeline", "--micro-batches", "4", "--db", db, check_json=True)
    return dict(naive, db=db), dict(piped, db=db)


def test_naive_split_leaves_each_device_idle_about_half_the_time(naive_and_pipeline):
    naive, _ = naive_and_pipeline
    assert all(0.05 < b <= 0.62 for b in naive["devices_busy"]), naive["devices_busy"]
    assert naive["bubble"]["theory"] == pytest.approx(0.5)


def test_pipeline_bubble_is_smaller_than_the_naive_one(naive_and_pipeline):
    naive, piped = naive_and_pipeline
    assert piped["bubble"]["theory"] == pytest.approx(0.2)
    assert piped["bubble"]["measured"] <= naive["bubble"]["measured"] - 0.1, (piped["bubble"], naive["bubble"])


def test_each_rank_draws_its_batch_as_data_time_on_its_own_device(naive_and_pipeline):
    """Drawing the batch is the core's work: a "data" span opens every step on each CPU device."""
    from engine.store import Store
    naive, _ = naive_and_pipeline
    db = naive["db"]
    with Store(db) as store:
        rows = store.timeline(naive["run_id"])
    for device in naive["devices"]:
        steps = sorted({step for step, dev, *_ in rows if dev == device})
        first_kind = {step: min((t0, kind) for s, dev, kind, t0, _ in rows if s == step and dev == device)[1]
                      for step in steps}
        assert steps and set(first_kind.values()) == {"data"}, (device, first_kind)


def test_data_parallel_batch_split_matches_the_tutorial():
    # The seed's DataParallel example: 100 rows, batch 30, 3 devices.
    _, summary = cli("run", "--model", "seed-linear", "--strategy", "data-parallel", "--devices", "cpu:3",
                     "--batch-size", "30", "--steps", "4", "--warmup", "0", "--json", check_json=True)
    assert summary["batch_split"] == [[10, 10, 10]] * 3 + [[4, 4, 2]]


def test_ddp_reports_the_same_batch_split():
    _, summary = cli("run", "--model", "seed-linear", "--strategy", "ddp", "--devices", "cpu:3",
                     "--batch-size", "30", "--steps", "4", "--warmup", "0", "--json", check_json=True)
    assert summary["batch_split"] == [[10, 10, 10]] * 3 + [[4, 4, 2]]
