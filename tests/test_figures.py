"""The figure definitions (engine.figures) from typed data: no store, no drawing, no Qt."""
from __future__ import annotations

from engine.figures import RunView, comparison_figures, experiment_figures, palette, run_figures
from engine.results import Bubble, ExperimentPoint, ExperimentResult, MeanStd, RunSummary, Sample, Step


def test_a_run_of_every_kth_step_says_so_in_its_step_figures():
    view = RunView(steps=[Step(step=s, t=0.1 * s, time_s=0.1, throughput=100.0, loss=1.0) for s in (0, 3, 6, 8)],
                   step_count=9, warmup=2)
    figures = {f.name: f for f in run_figures(view)}
    for name in ("throughput", "step-time", "loss"):
        assert figures[name].title.endswith(" (1 step in 3 of 9)"), name
        assert [m.label for m in figures[name].marks] == ["warm-up ends"] and figures[name].marks[0].x == 1.5
    assert figures["step-time"].y.text == "step time (ms)" and figures["step-time"].series[0].y[0] == 100.0
    assert figures["step-time"].columns == ["step", "step time (s)"] and figures["step-time"].rows[0] == [0, 0.1]
    assert "1 step in" not in run_figures(RunView(steps=view.steps, step_count=4))[2].title


def test_utilization_has_each_devices_mean_over_its_faint_samples_in_its_colour():
    samples = [Sample(t=0.1 * k, device=d, util=float(10 * k + i)) for k in range(4) for i, d in
               enumerate(("cuda:1", "cuda:0"))]
    util = run_figures(RunView(summary=RunSummary(devices=["cuda:0", "cuda:1"]), samples=samples))[0]
    assert [(s.name, s.faint, s.color) for s in util.series] == [
        ("cuda:0 raw", True, palette.series_color(0)), ("cuda:1 raw", True, palette.series_color(1)),
        ("cuda:0", False, palette.series_color(0)), ("cuda:1", False, palette.series_color(1))]
    assert util.series_named("cuda:1").y == [0.0, 5.0, 10.0, 15.0]  # the one-second trailing mean
    assert util.columns[1:3] == ["util cuda:0 (%)", "util cuda:1 (%)"] and util.y_range == (0, 100)


def test_runs_compared_get_a_colour_each_a_dash_per_device_and_distinct_names():
    def view(throughput):
        return RunView(summary=RunSummary(devices=["cpu:0", "cpu:1"]), label="12:00:00 ddp",
                       steps=[Step(step=s, throughput=throughput) for s in range(3)],
                       samples=[Sample(t=0.1 * k, device=d, util=50.0, mem_used=2 ** 20) for k in range(3)
                                for d in ("cpu:0", "cpu:1")])
    figures = {f.name: f for f in comparison_figures([view(100.0), view(200.0)])}
    throughput = figures["throughput"]
    assert [s.name for s in throughput.series] == ["12:00:00 ddp #1", "12:00:00 ddp #2"]
    assert [s.color for s in throughput.series] == [palette.series_color(0), palette.series_color(1)]
    assert throughput.title == "Throughput per step · 2 runs" and throughput.columns[0] == "series"
    assert [(s.name, s.dash) for s in figures["utilization"].series][:2] == [("12:00:00 ddp #1 cpu:0", 0),
                                                                           ("12:00:00 ddp #1 cpu:1", 1)]
    assert all(not s.faint for s in figures["utilization"].series)  # the means alone


def test_an_experiment_names_its_sweep_axis_and_marks_the_best_and_the_automatic_split():
    def point(size, seconds):
        return ExperimentPoint(label=f"split size {size}", strategy="pipeline", x=size,
                               step_time_s=MeanStd(seconds, seconds / 10), throughput=MeanStd(64 / seconds, 1.0),
                               bubble=Bubble(0.3, 0.2))
    result = ExperimentResult(name="split-size", best="split size 8", automatic_split=[4],
                              points=[point(4, 0.3), point(8, 0.2), ExperimentPoint(label="failed", x=16)])
    figures = {f.name: f for f in experiment_figures(result)}
    sweep = figures["sweep"]
    assert sweep.x.text == "split size (samples per micro-batch)" and sweep.y.text == "step time (ms)"
    assert [(m.label, m.x, m.y) for m in sweep.marks] == [("best: split size 8", 8, 200.0),
                                                          ("automatic split", 4, None)]
    assert sweep.marks[1].color == palette.MUTED and sweep.series[0].yerr == [30.0, 20.0]
    assert [s.name for s in sweep.series] == ["pipeline", "points"]  # a point without a strategy: its own line
    assert sweep.rows[2] == ["failed", None, 16, None, None] and not sweep.series[1].points()
    bars = figures["step-time"].bars
    assert bars.labels[bars.best] == "split size 8" and bars.values == [300.0, 200.0, None]
