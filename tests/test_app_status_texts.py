"""What the app says while a run starts and an experiment goes, and what tells stored runs apart, without a
window (app/state/run_status.py, experiment_status.py, run_settings.py)."""
from __future__ import annotations

import pytest

from app.state.live_data import RunProgress
from engine.config import ExperimentConfig
from engine.devices import Device
from engine.events import Launched, Started
from engine.results import Step

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

STARTED = Started(t=1.0, devices=[Device("cpu:0", "cpu", 0), Device("cpu:1", "cpu", 1)], theory_bubble=0.2,
                  split=[2], micro_batches=4)


def starting_run() -> RunProgress:
    return RunProgress(run_id="r1", config=ExperimentConfig(strategy="pipeline", devices="cpu:2"), steps_total=3,
                       status="starting", label="run r1")


def test_between_run_and_the_first_step_the_texts_follow_launched_and_started():
    from app.state.run_status import starting_phase, starting_status, starting_text
    run = starting_run()
    # The first run's worker may wait for the fork server's torch before its ranks exist.
    assert starting_text(run, first_run=True) == \
        "starting: launching the worker (the first run after start takes longer)…"
    assert starting_text(run) == "starting: launching the worker…"    # later runs: no excuse needed
    run.apply(Launched(t=0.5, pids={"0": 1, "1": 2}, device_pids={"cpu:0": 1, "cpu:1": 2}))
    assert starting_text(run, first_run=True) == starting_text(run) == "starting: the ranks build the model and meet…"
    assert starting_status(run) == "pipeline on cpu:2 · starting: the ranks build the model and meet…"
    assert starting_phase(run) == "building…"
    run.apply(STARTED)
    assert starting_text(run) == "starting: every rank is ready, taking the first step…"
    assert starting_status(run).startswith("pipeline on cpu:0, cpu:1 · ")
    run.apply(Step(step=0, time_s=0.01, busy={"cpu:0": 0.5, "cpu:1": 0.5}))
    assert starting_text(run) is None and starting_phase(run) is None and starting_status(run) is None
    ended = starting_run()
    ended.status = "failed"   # a run that ended before its first step is not starting any more
    assert starting_text(ended) is None


def test_a_watched_script_is_named_by_its_file_and_its_open_end_shows_no_total():
    from app.state.run_status import finished_text, live_title, running_text, time_left_text
    from engine.run.session import RunResult
    run = RunProgress(run_id="r2", config=ExperimentConfig(strategy="script", script="/work/train.py",
                                                           devices="cpu:2"), steps_total=0, status="starting",
                      label="run r2")
    run.apply(STARTED)
    run.apply(Step(step=0, time_s=0.01, busy={"cpu:0": 0.5, "cpu:1": 0.5}))
    run.status = "running"
    assert live_title(run) == "Live: run r2, script train.py on cpu:0, cpu:1"
    assert running_text(run).startswith("Running script train.py on cpu:0, cpu:1 · step 1 · ")
    assert time_left_text(run) is None   # no end to count down to
    assert finished_text(RunResult(run_id="r2", status="stopped", summary=None), run, 1.0) == "Stopped after 1 steps"


def test_an_experiment_says_which_point_of_how_many_and_how_it_ended():
    from app.state.experiment_status import PointRun, finished_text, finished_title, running_text, time_left_text
    from engine.results import ExperimentPoint, ExperimentResult, MeanStd
    run = PointRun("compare-strategies", k=8, n=15, label="pipeline", points=5, repeats=3)
    assert (run.point, run.repeat) == (3, 2)
    assert run.header == "Compare strategies · point 3 of 5: pipeline · run 2 of 3"   # the preset named for people
    assert run.bar_text == "run 8 of 15: pipeline"
    once = PointRun("schedules", k=2, n=3, label="gpipe", points=3)
    assert once.header == "Compare pipeline schedules · point 2 of 3: gpipe"        # one repeat: no run count
    # the plots' line where a run starts: each repeat its own label, not "pipeline" three times
    assert (run.mark, once.mark) == ("pipeline 2/3", "gpipe")
    progress = starting_run()
    progress.apply(Launched(t=0.5))
    assert running_text(once, progress) == \
        "Compare pipeline schedules · point 2 of 3: gpipe · starting: the ranks build the model and meet…"
    progress.apply(STARTED)
    for k in range(2):
        progress.apply(Step(step=k, time_s=0.005))
    assert running_text(once, progress) == \
        "Compare pipeline schedules · point 2 of 3: gpipe · step 2/3 · 5.0 ms/step"
    # The experiment's own time left: 1 run and 2 of the second's 3 steps took 10 s, 1 1/3 runs are left.
    assert time_left_text(once, progress, 10.0) == "≈ 8.0 s left of 3 runs"
    assert time_left_text(PointRun("schedules", k=1, n=3, label="gpipe", points=3), progress, 2.0) is None  # 1st run

    points = [ExperimentPoint(label, step_time_s=MeanStd(t)) for label, t in (("single", 0.3), ("pipeline", 0.1))]
    points.append(ExperimentPoint("ddp", error="rank 1 failed"))
    result = ExperimentResult(name="compare-strategies", best="pipeline", points=points)
    assert finished_text(result) == "Compare strategies finished: 3 points, best pipeline; 1 point failed"
    assert finished_title(result).endswith("Compare strategies finished: 3 points, best pipeline; 1 point failed")
    assert finished_text(ExperimentResult(name="schedules", status="stopped")) == \
        "Compare pipeline schedules stopped: 0 points"
    assert finished_text(ExperimentResult(name="my-own", status="stopped")) == "my-own stopped: 0 points"   # unknown


def test_the_history_names_the_settings_that_tell_runs_apart():
    from app.state import run_settings
    from engine.config import ExperimentConfig
    from engine.results import RunSummary
    # As the store reads them back: what an older version stored and this one cannot read takes its default.
    pipeline = ExperimentConfig.from_stored({
        "strategy": "pipeline", "model": "mlp", "width": 64, "depth": 4, "devices": "cpu:2", "micro_batches": None,
        "schedule": "1f1b", "batch_size": 64, "steps": 8, "warmup": 2, "lr": None, "retired_option": 3,
        "seed": "zero"})
    assert pipeline.seed == 0 and pipeline.steps == 8
    single = pipeline.replace(strategy="single", schedule="gpipe", batch_size=None, steps=20)
    assert run_settings.model_text(pipeline) == "mlp 64×4"
    assert run_settings.model_text(ExperimentConfig(model="custom", model_file="/x/my_model.py")) == "file: my_model.py"
    assert run_settings.schedule_text(pipeline, None) == "1f1b"
    assert run_settings.schedule_text(single, None) == "—"          # no schedule applies to one device
    assert run_settings.schedule_text(pipeline, RunSummary(schedule="gpipe")) == "gpipe"  # what ran wins
    assert run_settings.micro_batches_text(pipeline, None) == "4"    # the engine's default
    assert run_settings.micro_batches_text(pipeline.replace(split_size=16), None) == "size 16"
    assert run_settings.micro_batches_text(single, None) == "—"
    assert run_settings.batch_text(pipeline, None) == "64"
    assert run_settings.batch_text(single, RunSummary(batch_size=128)) == "128"
    # Beside its own columns, what else differs among the runs listed; what is alike is not repeated.
    keys = run_settings.differing([pipeline, single])
    assert keys == ["steps"]
    assert run_settings.others_text(pipeline, keys) == "steps 8"
    assert run_settings.differing([pipeline, pipeline.replace(lr=0.1)]) == ["lr"]
    assert run_settings.others_text(pipeline, ["lr", "warmup"]) == "lr default · warm-up 2"
