"""The figure definitions (engine.figures) from typed data: no store, no drawing, no Qt."""
from __future__ import annotations

import pytest

from engine.figures import RunView, comparison_figures, experiment_figures, palette, run_figures
from engine.results import Bubble, ExperimentPoint, ExperimentResult, MeanStd, RunSummary, Sample, Step

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def test_a_run_of_every_kth_step_says_so_in_its_step_figures():
    view = RunView(steps=[Step(step=s, t=0.1 * s, time_s=0.1, throughput=100.0, loss=1.0) for s in (0, 3, 6, 8)],
                   step_count=9, warmup=2)
    figures = {f.name: f for f in run_figures(view)}
    for name in ("throughput", "step-time", "loss"):
        assert figures[name].title.endswith(" (1 step in 3 of 9)"), name
        assert [m.label for m in figures[name].marks] == ["warm-up ends"] and figures[name].marks[0].x == 1.5
    assert figures["step-time"].y.text == "step time (ms)" and figures["step-time"].series[0].y[0] == 100.0
    assert figures["step-time"].columns == ["step", "step time (ms)"] and figures["step-time"].rows[0] == [0, 100.0]
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


def test_points_within_each_others_spread_are_tied_and_none_is_marked_best():
    """"Best" only when the fastest beats the next beyond their spread (mean ± std, widened to the runs'
    min-max): a comparison that cannot tell two points apart says so in every view, not a winner by noise."""
    from app.state.experiment_status import finished_text
    from engine.cli.report import experiment_table
    from engine.experiments import best_and_tied, preset_title

    def point(label, mean, std, low, high):
        return ExperimentPoint(label=label, strategy=label, step_time_s=MeanStd(mean, std),
                               step_time_range=[low, high], throughput=MeanStd(64 / mean, 1.0), run_ids=["a", "b"])
    pipeline, naive, ddp = point("pipeline", 0.276, 0.004, 0.271, 0.281), point("naive", 0.280, 0.003, 0.276, 0.29), \
        point("ddp", 0.400, 0.010, 0.39, 0.41)
    assert best_and_tied([naive, pipeline, ddp]) == ("pipeline", ["naive"])
    # The naive split's fastest run (0.276) inside the pipeline's mean + std (0.280): tied though the means differ.
    narrow = point("naive", 0.285, 0.001, 0.279, 0.286)
    assert best_and_tied([narrow, pipeline]) == ("pipeline", ["naive"])
    assert best_and_tied([point("naive", 0.285, 0.001, 0.284, 0.286), pipeline]) == ("pipeline", [])

    tied = ExperimentResult(name="compare-strategies", best="pipeline", tied=["naive"], points=[pipeline, naive, ddp])
    assert tied.winner is None and tied.verdict() == "tied: pipeline, naive (within their spread)"
    figures = {f.name: f for f in experiment_figures(tied, preset_title(tied.name))}
    assert figures["step-time"].bars.best is None   # no bar highlighted
    assert figures["step-time"].title == "Step time per point · Compare strategies (mean ± std)"   # for people
    assert figures["step-time"].columns[-3:] == ["step time min (ms)", "step time max (ms)", "runs"]
    assert figures["step-time"].rows[1][-3:] == [pytest.approx(276.0), pytest.approx(290.0), 2]
    assert finished_text(tied) == "Compare strategies finished: 3 points, tied: pipeline, naive (within their spread)"
    table = experiment_table(tied)
    assert "<- best" not in table and table.count("<- tied") == 2 and "tied: pipeline, naive" in table
    won = ExperimentResult(name="compare-strategies", best="pipeline", points=[pipeline, ddp])
    assert won.winner == "pipeline" and finished_text(won).endswith("best pipeline")
    assert experiment_figures(won)[0].bars.best == 0


# -- plots that read well: gaps, labels, colours, names ---------------------------------------
def test_a_gap_in_the_samples_breaks_the_line_and_late_samples_do_not():
    import numpy as np

    from engine.figures.gaps import broken, gap_after
    t = [0.0, 0.1, 0.2, 0.3, 0.55, 0.65, 40.0, 40.1]   # 0.25 s late: a starved sampler; 39 s: none taken
    assert gap_after(t) == [5]
    x, y = broken(t, list(range(8)), [5])
    assert y[6] is None and x[6] == (0.65 + 40.0) / 2 and y[7] == 6  # the break sits in the gap, x ascending
    xs, ys = broken(np.array(t), np.arange(8.0), gap_after(np.array(t)))   # the app's arrays: the same rule
    assert np.isnan(ys[6]) and list(np.flatnonzero(np.isnan(ys))) == [6] and np.all(np.diff(xs) > 0)
    # thinned telemetry: 10-s buckets, then samples as taken; a gap of a bucket is none, of five buckets is
    buckets = [5.0, 15.0, 25.0, 75.0, 85.0, 89.5, 89.6, 89.7]
    spans = [10.0, 10.0, 10.0, 10.0, 10.0, None, None, None]
    assert gap_after(buckets, spans) == [2]


def test_a_runs_telemetry_figures_break_where_the_sampler_stopped():
    samples = [Sample(t=0.1 * k, device="cpu:0", util=50.0, mem_used=700 * 2 ** 20) for k in range(10)]
    samples += [Sample(t=40.0 + 0.1 * k, device="cpu:0", util=100.0, mem_used=0.0) for k in range(10)]
    figures = {f.name: f for f in run_figures(RunView(summary=RunSummary(devices=["cpu:0"]), samples=samples))}
    for name, key in (("memory", "cpu:0"), ("utilization", "cpu:0"), ("utilization", "cpu:0 raw")):
        curve = figures[name].series_named(key)
        assert curve.y.count(None) == 1 and curve.points() == 20, (name, key)
        gap = curve.y.index(None)
        assert curve.x[gap - 1] < 1.0 < curve.x[gap] < 40.0 <= curve.x[gap + 1], (name, key)
    assert len(figures["memory"].rows) == 20   # the table: the samples, no breaks


def test_a_devices_colour_is_its_number_wherever_it_is_drawn():
    assert palette.device_color("cuda:1") == palette.device_color("cpu:1") == palette.device_color("core 1")
    alone = run_figures(RunView(summary=RunSummary(devices=["cpu:1"]),
                                samples=[Sample(t=0.1 * k, device="cpu:1", util=5.0, mem_used=1.0) for k in range(3)]))
    both = run_figures(RunView(summary=RunSummary(devices=["cpu:0", "cpu:1"]),
                               samples=[Sample(t=0.1 * k, device=d, util=5.0, mem_used=1.0) for k in range(3)
                                        for d in ("cpu:0", "cpu:1")]))
    assert alone[1].series_named("cpu:1").color == both[1].series_named("cpu:1").color == palette.series_color(1)
    assert palette.device_color("cpu", 3) == palette.series_color(3)   # no number: its place
    # Every node has a cpu:0: a node's device takes its place among the run's.
    assert palette.device_color("node1/cpu:0", 1) == palette.series_color(1) != palette.device_color("node0/cpu:0", 0)


def test_labels_of_close_lines_take_rows_and_none_overlaps_in_one():
    from engine.figures.label_rows import label_rows
    # "run 182154" at 10 s, 8 s wide; "end" a second later; the next run's start far off
    assert label_rows([10.0, 11.0, 40.0], [8.0, 3.0, 8.0]) == [0, 1, 0]
    many = label_rows([float(x) for x in range(0, 20, 2)], [7.0] * 10, rows=3)   # an experiment's short runs
    assert many[:4] == [0, 1, 2, None] and many[4] == 0
    for row in range(3):
        spans = sorted((2 * i, 2 * i + 7) for i, r in enumerate(many) if r == row)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), row


def test_runs_compared_are_named_by_the_settings_that_differ():
    def view(label, m, seed=0):
        return RunView(summary=RunSummary(devices=["cpu:0", "cpu:1"], micro_batches=m), label=label,
                       config={"strategy": "pipeline", "devices": "cpu:2", "micro_batches": None, "seed": seed},
                       steps=[Step(step=s, throughput=100.0) for s in range(3)])
    names = [s.name for s in comparison_figures([view("18:29:22 pipeline", 8), view("18:22:33 pipeline", 4)])[2].series]
    assert names == ["pipeline m=8", "pipeline m=4"]
    names = [s.name for s in comparison_figures([view("18:29:22 pipeline", 8), view("18:22:33 pipeline", 8)])[2].series]
    assert names == ["18:29:22 pipeline", "18:22:33 pipeline"]   # the same settings: when they ran
    names = [s.name for s in comparison_figures([view("a", 8), view("b", 4, seed=1)])[2].series]
    assert names == ["pipeline m=8 seed=0", "pipeline m=4 seed=1"]


def test_a_run_with_tensor_memory_has_its_figure_and_table():
    from engine.results import TensorMemory
    mib = 2 ** 20
    summary = RunSummary(devices=["cpu:0", "cpu:1"],
                         tensor_memory=[TensorMemory(params=mib, grads=mib, activations=mib // 2), None])
    figures = {f.name: f for f in run_figures(RunView(summary=summary))}
    memory = figures["tensor-memory"]
    assert memory.bars.labels == ["cpu:0"] and memory.bars.values == [2.5]   # a device without figures: no bar
    assert memory.columns[:5] == ["device", "params (MiB)", "grads (MiB)", "optimizer (MiB)", "activations (MiB)"]
    assert memory.rows == [["cpu:0", 1.0, 1.0, 0.0, 0.5, 2.5, None]]
    assert "tensor-memory" not in {f.name for f in run_figures(RunView(summary=RunSummary(devices=["cpu:0"])))}


def test_the_timeline_table_names_each_compute_interval_by_its_plan_action():
    """With the run's plan, each forward and backward says which action it ran (the last stage's loss, timed
    as a forward right after its forward, the same one); other kinds, and runs without a plan, say nothing."""
    from engine.figures.timeline import timeline_figure
    rows = [(3, "cpu:0", "forward", 0.0, 0.1), (3, "cpu:0", "forward", 0.1, 0.2), (3, "cpu:0", "wait", 0.2, 0.3),
            (3, "cpu:1", "forward", 0.1, 0.15), (3, "cpu:1", "forward", 0.15, 0.17)]
    figure = timeline_figure(rows, ["cpu:0", "cpu:1"], plan=[["0F0", "0F1"], ["", "1F0"]])
    assert figure.columns[-1] == "action"
    assert [(r[1], r[2], r[-1]) for r in figure.rows] == [
        ("cpu:0", "forward", "0F0"), ("cpu:0", "forward", "0F1"), ("cpu:1", "forward", "1F0"),
        ("cpu:1", "forward", "1F0"), ("cpu:0", "wait", None)]
    assert "action" not in timeline_figure(rows, ["cpu:0", "cpu:1"]).columns


def test_table_files_keep_six_digits_and_a_thousandth_of_the_unit():
    from engine.figures.numbers import table_value
    assert [table_value(v) for v in (800.0, 1.00042, 0.000123456789, 3600123.4567, 12.3456789, -0.0, 7, None)] \
        == ["800", "1.00042", "0.000123457", "3600123.457", "12.3457", "0", 7, ""]
    assert table_value(float("nan")) == "" and table_value("cpu:0") == "cpu:0"


def test_a_gpus_sm_activity_is_dotted_beside_its_utilization_on_the_same_axis():
    """Issue 33: "utilization" is the time any kernel ran; SM activity (NVML's GPM) is how much of the GPU
    worked: a GPU at 100 % utilization and 20 % SM activity is mostly unused, and both read on one axis."""
    samples = [Sample(t=0.1 * k, device="cuda:0", util=100.0, sm_active=20.0 if k else None) for k in range(5)]
    util = run_figures(RunView(summary=RunSummary(devices=["cuda:0"]), samples=samples))[0]
    sm = util.series_named("cuda:0 SM activity")
    assert sm is not None and sm.dash == 1 and sm.color == util.series_named("cuda:0").color
    assert sm.y == [20.0] * 4 and util.y_range == (0, 100)
    assert util.columns[-1] == "SM activity cuda:0 (%)" and [r[-1] for r in util.rows] == [None] + [20.0] * 4
