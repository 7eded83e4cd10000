"""A stored long run opens in the history as fast as a short one (every k-th step, bucketed telemetry, the last
kept timelines); `make bench` times a 200,000-step one."""
from __future__ import annotations

import time

import pytest

from engine.results import RunSummary, Step, from_json
from engine.store import Store

STEPS = 50_000   # ten times the steps the history reads (PLOT_POINTS): as long as the test needs


@pytest.fixture
def long_run(private_state):
    """A run as a 50,000-step pipeline leaves it: every step's row, a sample of timelines, thinned telemetry."""
    db = private_state / "runs.sqlite3"
    with Store(db) as store:
        run_id = store.create_run({"strategy": "pipeline", "model": "mlp", "devices": "cpu:2", "steps": STEPS,
                                   "width": 512, "depth": 8})
        kept = {k for k in range(STEPS) if k < 200 or k >= STEPS - 200}
        for start in range(0, STEPS, 10_000):
            store.add_steps(run_id, [
                Step(step=k, t=0.004 * (k + 1), time_s=0.004, samples=256, throughput=64_000.0,
                     loss=2.0 / (1 + k / 1000), busy={"cpu:0": 0.8, "cpu:1": 0.8},
                     intervals={"cpu:0": [["forward", 0.004 * k, 0.004 * k + 0.002]],
                                "cpu:1": [["backward", 0.004 * k + 0.002, 0.004 * k + 0.004]]})
                for k in range(start, start + 10_000)], kept_steps=kept)
        store.add_samples(run_id, [{"t": 0.1 * i, "device": f"cpu:{d}", "util": 80.0, "mem_used": 900 * 2 ** 20}
                                   for i in range(8_000) for d in range(2)])
        store.thin_samples(run_id, 200.0, 1.0)
        store.finish_run(run_id, "finished", from_json(RunSummary, {
            "run_id": run_id, "status": "finished", "strategy": "pipeline", "model": "mlp",
            "devices": ["cpu:0", "cpu:1"], "split": [4], "micro_batches": 8, "steps": STEPS,
            "steps_measured": STEPS - 2, "step_time_s": {"mean": 0.004, "std": 0.0},
            "throughput": {"mean": 64_000.0, "std": 0.0}, "loss": {"first": 2.0, "last": 0.01},
            "devices_busy": [0.8, 0.8], "bubble": {"measured": 0.2, "theory": 0.0588}, "notes": []}))
    return run_id


def test_a_long_run_opens_in_the_history_every_kth_step_and_its_last_timelines(qtbot, window, long_run):
    window.history.refresh()
    qtbot.waitUntil(lambda: long_run in window.history.run_ids(), timeout=10_000)
    row = window.history.run_ids().index(long_run)
    started = time.perf_counter()
    with qtbot.waitSignal(window.sigHistoryShown, timeout=10_000):
        window.history.table.selectRow(row)
    took = time.perf_counter() - started
    plots = window.plots
    assert plots.mode == "history"
    # Every k-th step's loss, the whole run spanned; the last steps' intervals; the telemetry in buckets.
    x, _ = plots.series_plots["loss"].series_data("loss")  # the run's loss figure's one series (engine.figures)
    assert 2_500 <= len(x) <= 5_001 and x[0] == 0 and x[-1] == STEPS - 1
    # as an export says it (on screen cut to the plot's width, then whole in the title's tooltip)
    loss = plots.series_plots["loss"]
    title = loss.getPlotItem().titleLabel
    assert "(1 step in 10 of 50,000)" in loss.full_title
    assert "(1 step in 10 of 50,000)" in title.text or title.toolTip() == loss.full_title
    assert {row[0] for row in plots.timeline.rows} == {STEPS - 3, STEPS - 2, STEPS - 1}
    assert "full timelines kept for 400 of 50,000 steps" in plots.bubble.formula.text()
    assert took < 10.0, f"took {took:.2f} s"  # 0.2 s here (`make bench`); a sanity bound, not the figure
