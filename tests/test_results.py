"""Typed results from JSON (engine/results/): what any version stored opens, and odd values do not break it."""
from __future__ import annotations

import pytest

from engine.cli.report import summary_table
from engine.results import BatchSplit, ExperimentResult, MeanStd, RunSummary, TensorMemory, from_json, to_json
from engine.store import Store

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def test_a_summary_round_trips_through_json():
    summary = RunSummary(run_id="r", strategy="ddp", devices=["cpu:0", "cpu:1"], step_time_s=MeanStd(0.1, 0.01),
                         batch_split=[BatchSplit([2, 2], 3)], tensor_memory=[TensorMemory(params=4), None])
    assert from_json(RunSummary, to_json(summary)) == summary


def test_fields_of_another_shape_take_their_defaults():
    odd = from_json(RunSummary, {
        "strategy": "pipeline", "future_field": 1,                 # unknown: ignored
        "bubble": None, "devices": None, "notes": "not a list",    # wrong kind: the default
        "batch_split": [[10, 10]],                                 # an older version's shape: dropped
        "step_time_s": {"std": 0.1},                               # a required part missing: none at all
        "loss": {"first": "nan?", "last": 2.0}})
    assert odd.strategy == "pipeline" and odd.devices == [] and odd.notes == []
    assert odd.bubble.measured is None and odd.batch_split == [] and odd.step_time_s is None
    assert odd.loss.first is None and odd.loss.last == 2.0
    assert "pipeline" in summary_table(odd)  # and what reads it does not fail
    result = from_json(ExperimentResult, {"points": [None, {"x": 1}, {"label": "a"}], "status": None})
    assert [p.label for p in result.points] == ["a"] and result.status == "finished"


def test_the_history_opens_with_a_summary_it_cannot_read(tmp_path):
    with Store(tmp_path / "runs.sqlite3") as store:
        run_id = store.create_run({"strategy": "single"})
        store.finish_run(run_id, "finished", RunSummary(strategy="single"))
        store._db.execute("UPDATE runs SET summary=? WHERE id=?", ('{"step_time_s": {"std": 1}, "bubble": 3}',
                                                                   run_id))
        (run,) = store.list_runs()
    assert run.summary.step_time_s is None and run.summary.bubble.measured is None
