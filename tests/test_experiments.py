"""Experiment presets: every preset at tiny scale, and the two findings issue 5 asks for."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from engine import cli
from engine.experiments import stored_result
from engine.results import to_json
from engine.store import Store

TINY = ["--repeats", "1", "--steps", "3", "--warmup", "1", "--width", "32", "--depth", "4", "--devices", "cpu:2",
        "--json"]

# Later blocks heavier (costs 1, 1, 1, 1, 2, 2): the balanced split is 4, the middle one 3.
HEAVY_LATER_BLOCKS = Path(__file__).resolve().parent.parent / "examples" / "heavy_later_blocks.py"


def run_experiment(capsys, *args) -> dict:
    code = cli.main(["experiment", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def assert_a_whole_experiment(result: dict, store_path, name: str, expected_points: int) -> None:
    """What every preset's experiment leaves: its points, each with its figures, the best among them, its runs and
    result stored, and the same points rebuilt from the runs alone (an app closed mid-way)."""
    assert result["name"] == name and result["status"] == "finished"
    assert len(result["points"]) == expected_points
    labels = [p["label"] for p in result["points"]]
    assert result["best"] in labels
    for point in result["points"]:
        assert set(point) >= {"label", "strategy", "split", "micro_batches", "step_time_s", "throughput", "run_ids",
                              "stage_balance"}
        assert point["step_time_s"]["std"] is not None and point["step_time_s"]["mean"] > 0
    with Store(store_path) as store:
        runs = store.list_runs(experiment_id=result["experiment_id"])
        assert len(runs) == expected_points
        experiment = store.get_experiment(result["experiment_id"])
        assert experiment.result.best == result["best"]
        # Had the app closed mid-way, the runs it kept give the same points, by the same reduction.
        rebuilt = stored_result(store, dataclasses.replace(experiment, result=None))
    assert rebuilt.status == "incomplete" and rebuilt.best == result["best"]
    # the what-if's predictions come with the finished result only (they need torch's schedules)
    assert [to_json(p) for p in rebuilt.points] == [dict(p, predicted_step_s=None) for p in result["points"]]


# compare-strategies and split-point run at a size that shows their findings, below: the same checks there.
@pytest.mark.parametrize("name,batch,expected_points", [
    ("split-size", "8", 4),
    ("dp-scaling", "32", 5),
    ("schedules", "32", 8),  # model-parallel and all seven schedules
    ("memory-scaling", "32", 5),  # ddp and fsdp x1, x2; tensor-parallel x2
])
def test_every_preset_at_tiny_scale(capsys, fresh_store, name, batch, expected_points):
    # The schedules' one-stage-per-device points compare at one split: left to each run's timing, the balanced
    # split of a 4-block mlp can fall either side of its middle block on loaded cores.
    split = ["--split", "2"] if name == "schedules" else []
    result = run_experiment(capsys, name, "--batch-size", batch, *split, *TINY)
    assert_a_whole_experiment(result, fresh_store, name, expected_points)
    if name == "schedules":   # every point predicted from the gpipe point's run, beside its measurement
        assert all(p["predicted_step_s"] > 0 for p in result["points"]), result["points"]
    if name == "memory-scaling":   # fsdp keeps half of ddp's state per device on two, and moves more
        points = {p["label"]: p for p in result["points"]}
        held = {label: sum(m[k] for k in ("params", "grads", "optimizer")) for label, p in points.items()
                for m in p["tensor_memory"][:1]}
        assert held["fsdp x2"] <= 0.55 * held["ddp x2"]
        assert points["fsdp x2"]["communication"][0]["traffic"][0]["operation"] == "all-gather"
    if name == "dp-scaling":
        assert [p["batch_split"] for p in result["points"] if p["label"] == "data-parallel x2"] == [[16, 16]]


def test_unknown_experiment_is_invalid_input(capsys):
    assert cli.main(["experiment", "fastest-possible"]) == 2
    assert "compare-strategies" in capsys.readouterr().err


@pytest.mark.solo   # compares figures that load moves: `make test` runs it alone
def test_compare_strategies_finds_pipeline_faster_than_naive_split(capsys, fresh_store):
    result = run_experiment(capsys, "compare-strategies", "--repeats", "1", "--steps", "8", "--devices", "cpu:2",
                            "--json")
    assert_a_whole_experiment(result, fresh_store, "compare-strategies", 5)
    by_label = {p["label"]: p for p in result["points"]}
    assert set(by_label) == {"single", "model-parallel", "pipeline", "data-parallel", "ddp"}
    piped, naive = by_label["pipeline"], by_label["model-parallel"]
    # Why it is faster, from inside each run (the two shared cores' noise moves both runs' step times, not
    # this): its micro-batches fill the naive split's idle half. Measured 0.25-0.30 against 0.51.
    assert piped["bubble"]["measured"] < naive["bubble"]["measured"] - 0.1, (piped["bubble"], naive["bubble"])
    # Faster by about a quarter here (121-157 ms against 171-193 over seven runs, 2026-12-02); once, on a
    # loaded CI machine, 3 % slower: the bound is a sanity bound, the ratio is the benchmark's (README).
    assert piped["step_time_s"]["mean"] < 1.1 * naive["step_time_s"]["mean"], (piped, naive)


def test_a_split_named_for_an_experiment_is_every_staged_points_split(fresh_store):
    """From the command line (its checks in a child): --split by a block's name, on an experiment's base."""
    from helpers import cli as run_cli
    _, result = run_cli("experiment", "schedules", "--model", "seed-toy", "--split", "net2", "--batch-size", "4",
                        "--micro-batches", "2", "--steps", "2", "--warmup", "0", "--repeats", "1", "--devices",
                        "cpu:2", "--json", check_json=True, timeout=240)
    assert [p["split"] for p in result["points"]] == [[2], [2], [2]]


def test_a_points_mean_and_spread_are_over_its_repeats(capsys, fresh_store):
    """With repeats, a point's step time is the mean and the standard deviation of its runs' means."""
    import statistics
    # split-size on a batch of 4: split sizes 1, 2 and 4, three points of two runs each
    result = run_experiment(capsys, "split-size", "--batch-size", "4", "--repeats", "2", *TINY[2:])
    assert len(result["points"]) == 3
    with Store(fresh_store) as store:
        for point in result["points"]:
            means = [store.get_run(r).summary.step_time_s.mean for r in point["run_ids"]]
            assert len(means) == 2
            assert point["step_time_s"]["mean"] == pytest.approx(statistics.fmean(means))
            assert point["step_time_s"]["std"] == pytest.approx(statistics.stdev(means))


@pytest.mark.solo   # compares figures that load moves: `make test` runs it alone
def test_split_point_finds_the_balanced_split_and_the_automatic_one_agrees(capsys, fresh_store):
    result = run_experiment(capsys, "split-point", "--model-file", str(HEAVY_LATER_BLOCKS), "--batch-size", "512",
                            "--micro-batches", "4", "--steps", "8", "--repeats", "1", "--devices", "cpu:2", "--json")
    assert_a_whole_experiment(result, fresh_store, "split-point", 6)
    swept = {p["label"]: p for p in result["points"] if p["x"] is not None}
    assert list(swept) == [f"split {k}" for k in range(1, 6)]
    seen = {label: (round(p["stage_balance"], 2), round(p["step_time_s"]["mean"] * 1000, 1))
            for label, p in swept.items()}
    # The finding, by each stage's busy time: 4 (4|4) is the even split, not the middle 3 (3|5).
    # Quiet, splits 1-5 measure about 0.15, 0.33, 0.6, 0.94, 0.4; with a busy loop running beside
    # them 4 still led (0.91 over 0.80). Step times are no test here: neighbouring splits differ by
    # less than the noise of two shared cores (CI once measured 3|5, 4|4 and 5|3 within 1.5 %), and
    # with a third busy process 1|7 even beat 4|4, its heavy stage then having a core to itself.
    # The fastest split is a benchmark figure (bench.engine_bench, README).
    assert max(swept, key=lambda label: swept[label]["stage_balance"]) == "split 4", seen
    assert result["automatic_split"] == [4]


def test_a_stop_while_the_next_run_launches_is_not_lost(tmp_path):
    """stop() as a run is about to start (here: from the progress callback) prevents that run."""
    from engine.config import ExperimentConfig
    from engine.experiments import ExperimentRunner
    base = ExperimentConfig(model="mlp", width=32, depth=4, devices="cpu:2", batch_size=32, steps=3, warmup=1)
    runner = None

    def on_progress(k, total, label):
        if k == 2:
            runner.stop()

    runner = ExperimentRunner("schedules", base, repeats=1, db_path=tmp_path / "runs.sqlite3",
                              on_progress=on_progress)
    result = runner.run()
    assert result.status == "stopped"
    assert [p.label for p in result.points] == ["model-parallel"]
    with Store(tmp_path / "runs.sqlite3") as store:
        assert len(store.list_runs()) == 1  # the second run was never launched


def test_presets_not_about_schedules_run_the_given_schedule():
    """compare-strategies, split-size and split-point keep the user's schedule; only schedules chooses its own.
    The points' configs are checked, nothing runs."""
    from engine.experiments import PRESETS, default_config, limits
    base = default_config({"model": "mlp", "width": 32, "depth": 4, "devices": "cpu:2", "batch_size": 32,
                           "steps": 3, "schedule": "1f1b", "micro_batches": 4})
    points = {p.label: p.config for p in PRESETS["compare-strategies"].points(base)}
    assert points["pipeline"].schedule == "1f1b" and points["pipeline"].micro_batches == 4
    sizes = PRESETS["split-size"].points(base)
    assert {p.config.schedule for p in sizes} == {"1f1b"}
    assert all(32 // p.config.split_size >= 2 for p in sizes)     # 1f1b needs a micro-batch per stage
    from engine.strategies import SCHEDULES
    assert [p.config.schedule for p in PRESETS["schedules"].points(base)][1:] == list(SCHEDULES)
    # Two stages sharing one GPU cannot run 1f1b: that point runs gpipe (limits() says so on one GPU).
    from engine.experiments.presets import _schedule_on
    assert _schedule_on(base, "cuda:0,cuda:0") == "gpipe" and _schedule_on(base, "cpu:2") == "1f1b"
    assert limits("compare-strategies", base) == []               # CPU devices: nothing left out
    assert all(p.sets for p in PRESETS.values())                   # each says what it sets itself
