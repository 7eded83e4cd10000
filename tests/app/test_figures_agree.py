"""Figures that agree (issue 54): the status bar's throughput is samples over time on uneven steps, while the run
goes and once it ended, as the summary's; the what-if table puts the step a row's run measured beside the row's
prediction, with the error and its sign. Events and runs are built, not run: each test takes a second or two."""
from __future__ import annotations

from engine.config import ExperimentConfig
from engine.events import Device, Finished, Started
from engine.planner.what_if import Prediction
from engine.record.totals import RunTotals
from engine.results import Bubble, MeanStd, RunSummary, Step, TelemetrySummary
from engine.run.session import RunResult
from engine.store import Store

BATCH = 64
UNEVEN = [0.1, 0.3, 0.1, 0.5]   # seconds: 256 samples in 1.0 s, where the mean of each step's rate says 405/s



def test_the_status_bars_throughput_is_samples_over_time_on_uneven_steps(qtbot, window_at_1280, monkeypatch):
    from app.state.live_data import RunProgress
    win = window_at_1280
    monkeypatch.setattr(win.idle, "start", lambda: None)   # the run's end restarts the idle telemetry: not here
    config = ExperimentConfig(strategy="model-parallel", devices="cpu:2", batch_size=BATCH, steps=len(UNEVEN),
                              warmup=0)
    progress = RunProgress(run_id="r-uneven", config=config, steps_total=len(UNEVEN))
    win.center.follow_run(progress, take_view=True, mark="run")   # as RunFlow.begin_live_run has the plots follow
    win.runs.runs_begun = 2   # not the app's first run (whose status line says torch loads)
    progress.apply(Started(t=0.0, devices=[Device("cpu:0", "cpu", 0), Device("cpu:1", "cpu", 1)], split=[2]))
    steps = [Step(step=k, time_s=t, samples=BATCH, throughput=BATCH / t) for k, t in enumerate(UNEVEN)]
    for step in steps:
        progress.apply(step)
    win.runs.show_progress()
    expected = f"{BATCH * len(UNEVEN) / sum(UNEVEN):,.0f} samples/s"   # 256
    assert expected in win.status_label.text(), win.status_label.text()
    # the run's end: the summary's figure (the engine's RunTotals), the same samples over the same time
    totals = RunTotals(["cpu:0", "cpu:1"], warmup=0)
    for step in steps:
        totals.add(step)
    summary = RunSummary(run_id="r-uneven", strategy="model-parallel", devices=["cpu:0", "cpu:1"],
                         steps=len(UNEVEN), steps_measured=len(UNEVEN), step_time_s=totals.step_time.summary(),
                         throughput=totals.throughput_summary(), bubble=Bubble(measured=0.5, theory=0.5))
    progress.apply(Finished(t=1.0, status="finished", summary=summary))
    win.runs.worker.sigFinished.emit(RunResult("r-uneven", "finished", summary))
    assert expected in win.status_label.text() and "250.0 ms/step" in win.status_label.text(), \
        win.status_label.text()


def store_pipeline_run(db_path, schedule: str, micro_batches: int, step_s: float, disturbed: str | None = None):
    config = {"strategy": "pipeline", "model": "mlp", "width": 32, "depth": 4, "devices": "cpu:2", "split": [2],
              "batch_size": 64, "steps": 6, "warmup": 1, "schedule": schedule, "micro_batches": micro_batches}
    with Store(db_path) as store:
        run_id = store.create_run(config)
        store.finish_run(run_id, "finished", RunSummary(
            strategy="pipeline", devices=["cpu:0", "cpu:1"], split=[2], micro_batches=micro_batches,
            schedule=schedule, batch_size=64, steps=6, steps_measured=5, step_time_s=MeanStd(step_s),
            telemetry=TelemetrySummary(disturbed=disturbed)))
    return run_id


def test_a_what_if_rows_run_is_measured_beside_its_prediction(qtbot, window_at_1280, monkeypatch):
    win = window_at_1280
    flow, table = win.what_if, win.plan_view.what_if
    predictions = [Prediction("gpipe", 4, 0.100, 0.2, measured=True), Prediction("1f1b", 8, 0.080, 0.11)]
    # the what-if's child (torch's schedules) answers at once with these rows
    monkeypatch.setattr(flow.client, "request", lambda run_id: (setattr(flow.client, "run_id", run_id),
                                                                flow.client.sigPredictions.emit(run_id, predictions)))
    started: list = []
    monkeypatch.setattr(win.runs, "start", lambda config=None: started.append(win.current_config()))
    source = store_pipeline_run(win.db_path, "gpipe", 4, 0.100, disturbed="other programs took 20% of cpu:1")
    win.center_tabs.setCurrentWidget(win.plan_view)
    flow.show_run(source, runnable=True)   # as a run's end does (RunFlow._on_finished)
    assert table.rowCount() == 2 and table.item(1, 4).text() == ""   # 1f1b m=8: not run yet
    assert "predicted from a disturbed run (other programs took 20% of cpu:1)" in win.plan_view.what_if_caption.text()
    table.cellWidget(1, table.columnCount() - 1).click()   # the row's Run: the panel set to it, a run asked for
    qtbot.waitUntil(lambda: bool(started), timeout=5_000)
    assert (started[0].schedule, started[0].micro_batches) == ("1f1b", 8)
    ran = store_pipeline_run(win.db_path, "1f1b", 8, 0.0625)   # its run, as it ended
    flow.show_run(ran, runnable=True)
    # the table it came from stays, the row's measured step beside its prediction: 80 ms predicted, 62.5 measured
    assert table.rowCount() == 2 and win.plan_view.what_if_caption.text().startswith(f"What-if of run {source}")
    assert (table.item(1, 3).text(), table.item(1, 4).text(), table.item(1, 5).text()) == \
        ("80.0 ms", "62.5 ms", "+28.0 %")
    assert table.item(0, 4).text() == "100.0 ms"   # the source's own row: its own step


def test_a_starting_runs_bubble_box_shows_its_configured_theory_until_its_ranks_say_theirs(qtbot, window_at_1280):
    """Between Run and the ranks' `started` event (seconds under load) the box named no theory for a pipeline
    ("No pipeline bubble in theory for this strategy"); it shows the configured one, and says so."""
    win = window_at_1280
    config = ExperimentConfig(strategy="pipeline", devices="cpu:2", micro_batches=4, batch_size=BATCH, steps=4)
    win.runs.begin_live_run("r-starting", config, "run r-starting")
    bubble = win.plots.bubble
    assert bubble.theory.text() == "20.0%" and "as configured, until its ranks start" in bubble.formula.text(), \
        (bubble.theory.text(), bubble.formula.text())
    progress = win.plots.progress
    progress.apply(Started(t=0.0, devices=[Device("cpu:0", "cpu", 0), Device("cpu:1", "cpu", 1)], split=[2],
                           micro_batches=4, theory_bubble=0.2, theory_text="(p−1)/(m+p−1): p=2, m=4"))
    win.plots.refresh_bubble()
    assert "live, the last steps" in bubble.formula.text(), bubble.formula.text()
