"""The app's widgets, built from fake data: no worker, no planner, no torch."""
from __future__ import annotations

import csv
import dataclasses
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from app.state.ring_buffer import RingBuffer
from app_helpers import shown
from engine.config import ExperimentConfig
from engine.results import Bubble, RunSummary, Sample, Step, from_json


def sample(t, device, util=50.0, mem=1e9):
    return SimpleNamespace(t=t, device=device, util=util, mem_used=mem, mem_total=8e9)


def step_event(step, t0=0.0, dt=0.1):
    base = t0 + step * dt
    return Step(step=step, t=base + dt, time_s=dt, samples=64, throughput=640.0 + step, loss=2.3 - 0.1 * step,
                intervals={"cpu:0": [["forward", base, base + 0.03], ["backward", base + 0.06, base + 0.08]],
                           "cpu:1": [["transfer", base + 0.03, base + 0.032], ["forward", base + 0.032, base + 0.045],
                                     ["backward", base + 0.045, base + 0.06], ["wait", base + 0.06, base + 0.1]]},
                busy={"cpu:0": 0.5, "cpu:1": 0.3})


# -- ring buffer ------------------------------------------------------------------------

def test_ring_buffer_keeps_newest_rows_as_a_contiguous_view():
    buf = RingBuffer(4)
    for i in range(10):
        buf.append(i, 10 * i)
    assert len(buf) == 4
    assert buf.column(0).tolist() == [6, 7, 8, 9]
    assert buf.column(1).tolist() == [60, 70, 80, 90]
    assert buf.column(0).base is not None  # a view into the preallocated array, not a copy
    buf.extend(np.array([[10, 100], [11, 110], [12, 120]]))
    assert buf.column(0).tolist() == [9, 10, 11, 12]
    assert buf.last(1) == 120
    v = buf.version
    buf.clear()
    assert len(buf) == 0 and buf.version > v


def test_a_thinning_buffer_spans_the_whole_run_in_bounded_memory():
    """A loss curve of a million steps in 1,024 points: from the first step, evenly spaced, the newest kept."""
    from app.state.ring_buffer import ThinningBuffer
    buf = ThinningBuffer(1024)
    versions = set()
    for step in range(1_000_000):
        buf.append(step, 2.0 / (1 + step))
        versions.add(buf.version) if step % 100_000 == 0 else None
    x = buf.column(0)
    assert 512 <= len(buf) <= 1024 and x[0] == 0
    assert set(np.diff(x)) == {buf.stride}           # evenly spaced on the coarsest grid
    assert 1_000_000 - x[-1] <= buf.stride            # up to date
    assert buf.column(1)[-1] == 2.0 / (1 + x[-1])
    assert len(versions) > 1


def test_trailing_means_grow_with_the_buffer_as_if_computed_afresh():
    """Only new samples' means are computed; what the plot gets equals the whole computation."""
    from app.state.live_data import TrailingMeans
    from engine.telemetry.smooth import trailing_mean
    buf, means = RingBuffer(300), TrailingMeans()
    rng = np.random.default_rng(0)
    t = 0.0
    for batch in range(40):
        for _ in range(int(rng.integers(1, 20))):
            t += float(rng.uniform(0.02, 0.3))
            buf.append(t, float(rng.uniform(0, 100)))
        x, y = buf.column(0), buf.column(1)
        got = means.of(x, y)
        fresh = trailing_mean(x, y)
        # Once the ring has dropped samples, the first second's means keep the samples that fell off.
        settled = x >= x[0] + 1.0
        assert np.allclose(got[settled], fresh[settled]), batch


# -- plots --------------------------------------------------------------------------------

@pytest.fixture
def panel(qtbot, qapp_configured):
    from app.state.live_data import RunProgress, TelemetryHistory
    from app.views.plots.panel import PlotPanel
    now = time.perf_counter()
    telemetry = TelemetryHistory(10.0, origin=now - 60)
    telemetry.add([sample(now - 60 + k * 0.1, f"core {d}", util=50 + 40 * np.sin(k / 10 + d))
                   for k in range(590) for d in range(2)])
    p = PlotPanel(telemetry)
    qtbot.addWidget(p)
    p.resize(1200, 800)
    progress = RunProgress(run_id="run-x", config=ExperimentConfig(strategy="model-parallel"), devices=["cpu:0", "cpu:1"],
                           steps_total=6, split=[2], theory=0.5)
    p.begin_run(progress)
    for s in range(6):
        ev = step_event(s)
        p.steps.add(ev)
        progress.busy = ev.busy
        progress.bubble_history.append(0.6)
    return p


def test_plot_panel_draws_telemetry_steps_and_timeline(panel):
    panel.show()
    panel.redraw(force=True)
    # Each core: its raw samples (faint, no legend entry) and their one-second mean, named once.
    assert set(panel.series_plots["utilization"].series_keys()) == {"core 0", "core 1", "raw core 0", "raw core 1"}
    assert panel.series_plots["utilization"].legend_names() == ["core 0", "core 1"]
    assert len(panel.series_plots["utilization"].series_data("raw core 0")[0]) == 590
    assert panel.series_plots["throughput"].point_count() == 6 and panel.series_plots["loss"].point_count() == 6
    assert panel.timeline.devices == ["cpu:0", "cpu:1"]
    kinds = {row[2] for row in panel.timeline.rows}
    assert {"forward", "backward", "transfer", "wait"} <= kinds
    assert {row[0] for row in panel.timeline.rows} == {3, 4, 5}  # the last three steps
    assert panel.bubble.measured.text() == "60.0%"
    assert panel.bubble.theory.text() == "50.0%"  # (p-1)/(m+p-1), p=2, m=1
    ticks = panel.timeline.getPlotItem().getAxis("left")._tickLevels[0]
    assert ticks == [(0, "cpu:0  50%"), (1, "cpu:1  30%")]  # each row carries its device's busy share


def test_redraw_draws_one_group_a_tick_and_every_group_in_turn(panel):
    # Repainting every plot in one tick blocked the UI thread for 40-70 ms during a run.
    panel.show()
    panel.redraw(force=True)
    now = panel.now()
    panel.telemetry.add([sample(panel.telemetry.origin + now, "core 0", util=10.0)])
    panel.steps.add(step_event(6))
    panel.telemetry_frame_s = panel.step_frame_s = 0.0
    def samples_drawn():  # the samples (the new one may come after a gap: its break is no sample)
        return int(np.isfinite(panel.series_plots["utilization"].series_data("raw core 0")[1]).sum())

    telemetry_points = samples_drawn()

    def drawn_state():  # what each group last handed to its plots
        return (samples_drawn(), panel.series_plots["throughput"].series_data("throughput")[0][-1],
                max(r[0] for r in panel.timeline.rows))

    drawn = []
    for _ in range(3):
        before = drawn_state()
        panel.redraw()
        after = drawn_state()
        changed = [name for name, b, a in zip(("telemetry", "steps", "timeline"), before, after, strict=True) if a != b]
        assert len(changed) == 1, (changed, before, after)
        drawn += changed
    assert sorted(drawn) == ["steps", "telemetry", "timeline"]
    assert drawn_state() == (telemetry_points + 1, 6, 6)
    assert panel.redraw() == 0  # only the telemetry scroll was due, and no curve had new data


def test_a_new_step_repaints_each_plot_view_once(panel, qtbot, qapp):
    """The range moves before the paint: a range change found during the paint would paint twice."""
    from PySide6 import QtCore
    panel.show()
    qtbot.waitExposed(panel)
    panel.redraw(force=True)
    qapp.processEvents()

    class PaintCounter(QtCore.QObject):
        def __init__(self):
            super().__init__()
            self.count = 0

        def eventFilter(self, obj, event):  # noqa: N802
            if event.type() == QtCore.QEvent.Type.Paint:
                self.count += 1
            return False

    counters = {}
    for name in ("timeline", "throughput"):
        counters[name] = PaintCounter()
        panel.plots[name].viewport().installEventFilter(counters[name])
    for step in (6, 7):
        for counter in counters.values():
            counter.count = 0
        event = step_event(step, dt=0.1 + 0.05 * step)  # a longer step: the timeline's range grows
        event = dataclasses.replace(event, throughput=100.0 * step)  # beyond the y range (the axis keeps its width)
        panel.steps.add(event)
        panel.redraw(force=True)
        for _ in range(5):
            qapp.processEvents()
        assert {name: c.count for name, c in counters.items()} == {"timeline": 1, "throughput": 1}


def test_changing_texts_never_raise_the_window_minimum_size(qtbot, qapp_configured):
    """Status, mode and history lines elide; the bubble box wraps: the window fits a laptop screen."""
    from app.main_window import MainWindow
    win = MainWindow(start_services=False)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    qapp_configured.processEvents()
    before = win.minimumSizeHint()
    assert before.width() <= 1024 and before.height() <= 700, before  # a 1366x768 laptop, with a taskbar
    long = "Running pipeline on " + ", ".join(f"cuda:{i}" for i in range(16)) + " · step 30/30 · bubble 50%"
    win.set_status(long)
    win.plots.mode_label.setText(long)
    win.history.count_label.setText("12 runs in /a/very/long/path/" + "x" * 200 + "/runs.sqlite3")
    devices = [f"cuda:{i}" for i in range(8)]
    win.plots.bubble.show_figures(0.5, 0.2, "(p−1)/(V·m+p−1): p=8, V=2, m=4", "live, last steps")
    win.plots.timeline.set_devices(devices)
    win.plots.timeline.set_busy(dict.fromkeys(devices, 0.5))
    for _ in range(3):
        qapp_configured.processEvents()
    after = win.minimumSizeHint()
    assert after.width() == before.width() and after.height() <= before.height() + 8, (before, after)
    assert win.status_label.text() == long and win.status_label.toolTip() == long
    from PySide6 import QtWidgets
    shown = QtWidgets.QLabel.text(win.history.count_label)   # what is painted: cut in its middle
    assert shown.startswith("12 runs") and shown.endswith(".sqlite3") and "…" in shown, shown
    win.shutdown()


def test_on_a_laptop_screen_the_plots_keep_their_size_and_never_overlap(qtbot, qapp_configured):
    """1366x768: a height-for-width bubble box once made Qt squeeze the plot rows into each other."""
    from app.main_window import MainWindow
    win = shown(qtbot, MainWindow(start_services=False), (1366, 768))
    devices = [f"cuda:{i}" for i in range(4)]
    win.plots.bubble.show_figures(0.5, 0.2, "(p−1)/(m+p−1): p=4 stages, m=4", "live, last steps")
    win.plots.timeline.set_devices(devices)
    win.plots.timeline.set_busy(dict.fromkeys(devices, 0.5))
    qapp_configured.processEvents()
    from PySide6 import QtCore
    # in the plots' own coordinates (the timeline sits in a row of its own)
    rects = {name: QtCore.QRect(plot.mapTo(win.plots, QtCore.QPoint(0, 0)), plot.size())
             for name, plot in win.plots.plots.items()}
    for name, plot in win.plots.plots.items():
        assert rects[name].height() >= plot.minimumHeight(), (name, rects[name])
    bubble = win.plots.bubble
    assert bubble.height() >= bubble.layout().heightForWidth(bubble.width())  # its wrapped lines fit
    names = list(rects)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not rects[a].intersects(rects[b]), (a, rects[a], b, rects[b])
    win.shutdown()


def test_the_live_step_axis_moves_a_few_times_a_run_not_every_step(panel):
    from app.views.plots.panel import step_axis_end
    assert [step_axis_end(s, 400) for s in (0, 9, 10, 20, 99, 100, 250)] == [10, 10, 20, 50, 100, 200, 399]
    assert step_axis_end(3, 6) == 5 and step_axis_end(1500, 0) == 2000  # the run's end; no known end
    panel.show()
    panel.progress.steps_total = 400
    panel.set_mode("live")
    ranges = set()
    for step in range(6, 19):
        panel.steps.add(step_event(step))
        panel.redraw(force=True)
        x_range = panel.series_plots["throughput"].getPlotItem().getViewBox().viewRange()[0]
        ranges.add(tuple(round(v, 6) for v in x_range))
    assert ranges == {(-0.2, 10.2), (-0.4, 20.4)}  # two ranges over 13 steps


def test_a_one_point_series_is_drawn_as_a_dot_until_it_grows(qtbot, qapp_configured):
    from app.views.plots.series_plot import SeriesPlot
    plot = SeriesPlot("Loss", "loss")
    qtbot.addWidget(plot)
    plot.set_series("loss", np.array([0.0]), np.array([2.3]), "#ff0000")
    curve = plot._curves["loss"]
    assert curve.opts["symbol"] == "o" and len(curve.scatter.data) == 1
    plot.set_series("loss", np.array([0.0, 1.0]), np.array([2.3, 2.2]), "#ff0000")
    assert curve.opts["symbol"] is None


FILE_STARTS = {"png": b"\x89PNG\r\n\x1a\n", "svg": b"<?xml", "pdf": b"%PDF"}


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf", "csv"])
def test_every_plot_exports_even_before_it_is_laid_out(panel, tmp_path, fmt):
    # Not shown: the plots have never been laid out. The export draws the plot's figure off screen.
    panel.redraw(force=True)
    for name, widget in panel.plots.items():
        menu = [a.text() for a in widget.getPlotItem().getViewBox().menu.actions()]
        assert f"Export {fmt.upper()}…" in menu, (name, menu)  # offered in the plot's context menu
        out = widget.export(fmt, tmp_path / f"{name}.{fmt}")
        assert out is not None and out.stat().st_size > 0, name
        if fmt in FILE_STARTS:
            assert out.read_bytes().startswith(FILE_STARTS[fmt]), name
    if fmt == "svg":  # the curves as the plot holds them, each by its name
        text = (tmp_path / "utilization.svg").read_text()
        assert 'id="utilization/series/core 0"' in text and 'id="utilization/series/core 0 raw"' in text
        assert "Utilization per device" in text and "utilization (%)" in text and "time from now (s)" in text
    if fmt == "csv":
        rows = list(csv.reader((tmp_path / "throughput.csv").open()))
        assert rows[0] == ["series", "step", "throughput (samples/s)"] and len(rows) == 7
        assert {r[0] for r in rows[1:]} == {"throughput"}  # the live curve, named as the export names it
        memory = list(csv.reader((tmp_path / "memory.csv").open()))
        assert memory[0][2] == "memory used (MiB)" and float(memory[1][2]) == pytest.approx(1e9 / 2 ** 20)
        timeline = list(csv.reader((tmp_path / "timeline.csv").open()))
        assert timeline[0] == ["step", "device", "kind", "t0 (ms)", "t1 (ms)"] and len(timeline) > 10


def test_a_failed_plot_export_is_a_message_never_a_crash(panel, tmp_path, monkeypatch):
    from engine.export import ExportError, drawing

    def missing(*args, **kwargs):
        raise ExportError("png, svg, pdf and html export draw with matplotlib, which is not installed here")

    monkeypatch.setattr(drawing, "write", missing)
    panel.redraw(force=True)
    failed = []
    panel.series_plots["utilization"].sigExportFailed.connect(failed.append)
    assert panel.series_plots["utilization"].export("png", tmp_path / "util.png") is None
    assert len(failed) == 1 and "matplotlib" in failed[0] and not (tmp_path / "util.png").exists()
    # the table needs no drawing
    assert panel.series_plots["utilization"].export("csv", tmp_path / "util.csv") is not None


def test_history_mode_overlays_several_runs(panel):
    from app.state.stored_run import RunData
    runs = []
    for r in range(2):
        runs.append(RunData(
            run_id=f"run-{r}", label=f"run {r}", status="finished", config=ExperimentConfig(strategy="pipeline"),
            summary=RunSummary(devices=["cpu:0", "cpu:1"], bubble=Bubble(measured=0.3, theory=0.2),
                               devices_busy=[0.7, 0.7], split=[2], micro_batches=4),
            error=None,
            steps=[Step(step=s, throughput=100.0 * (r + 1), loss=2.0 - s * 0.1) for s in range(5)],
            timeline=[(s, "cpu:0", "forward", s * 0.1, s * 0.1 + 0.05) for s in range(5)],
            samples=[Sample(t=k * 0.1, device=f"cpu:{d}", util=50.0, mem_used=10 ** 9)
                     for k in range(30) for d in range(2)]))
    panel.show_runs(runs)
    assert panel.mode == "history"
    assert len(panel.series_plots["throughput"].series_keys()) == 2
    assert len(panel.series_plots["utilization"].series_keys()) == 4  # 2 runs x 2 devices, their one-second means alone
    assert len(panel.series_plots["utilization"].legend_names()) == 4
    assert panel.bubble.theory.text() == "20.0%"
    assert "Comparing 2 runs" in panel.mode_label.text()
    panel.set_mode("live")
    assert panel.mode == "live" and panel.series_plots["utilization"].legend_names() == ["core 0", "core 1"]


# -- split view -------------------------------------------------------------------------------

def blocks(n=5):
    from engine.planner.planning import BlockInfo
    return [BlockInfo(f"layer{i}", params=4160, cost_s=0.001 * (1 + i), out_bytes=256) for i in range(n)]


def test_split_view_preselects_and_marks_the_balanced_split(qtbot, qapp_configured):
    from PySide6 import QtCore

    from app.views.split_view import SplitView
    view = SplitView()
    qtbot.addWidget(view)
    view.set_context(True, 2, micro_batch_size=64)
    view.set_blocks(blocks(), [3])
    assert view.split() == (3,)
    assert "⚖" in view.table.item(3, 0).text()
    assert view.table.item(3, 0).checkState() == QtCore.Qt.CheckState.Checked
    assert "(balanced)" in view.summary.text()
    assert "16.0 KiB" in view.stage_text.text()  # 256 B per sample x 64 crosses the split
    # The user moves the split: tick block 2, untick block 3.
    with qtbot.waitSignal(view.sigSplitChanged):
        view.table.item(2, 0).setCheckState(QtCore.Qt.CheckState.Checked)
    with qtbot.waitSignal(view.sigSplitChanged):
        view.table.item(3, 0).setCheckState(QtCore.Qt.CheckState.Unchecked)
    assert view.split() == (2,)
    assert "(balanced)" not in view.summary.text()
    assert view.balanced_button.isEnabled()
    view.balanced_button.click()
    assert view.split() == (3,)


def test_split_view_is_off_for_strategies_without_stages(qtbot, qapp_configured):
    from app.views.split_view import SplitView
    view = SplitView()
    qtbot.addWidget(view)
    view.set_context(False, 2, micro_batch_size=64)
    view.set_blocks(blocks(), None)
    assert view.split() is None
    assert not view.table.isEnabled()


# -- experiment panel ----------------------------------------------------------------------------

def test_experiment_panel_builds_configs_and_places_problems(qtbot, qapp_configured):
    from app.views.experiment_panel import ExperimentPanel
    from engine.strategies import STRATEGIES
    panel = ExperimentPanel(cores=2)
    qtbot.addWidget(panel)
    panel.show()
    # Every registered strategy is offered with its description.
    picker = [n for n, s in STRATEGIES.items() if s.in_picker]   # a watched script: Run › Watch a script…
    assert [panel.strategy_combo.itemData(i) for i in range(panel.strategy_combo.count())] == picker
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("pipeline"))
    assert panel.strategy_desc.text() == STRATEGIES["pipeline"].description
    assert panel.mb_row.isVisible() and panel.schedule_combo.isVisible()
    panel.mb_spin.setValue(8)
    # Schedules named for people, their --schedule id in the tooltip.
    from PySide6 import QtCore
    interleaved = panel.schedule_combo.findData("interleaved1f1b")
    assert panel.schedule_combo.itemText(interleaved) == "Interleaved 1F1B"
    tip = panel.schedule_combo.itemData(interleaved, QtCore.Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith("<p>") and tip.endswith("<br>--schedule interleaved1f1b</p>")   # rich text: Qt wraps it
    panel.schedule_combo.setCurrentIndex(panel.schedule_combo.findData("1f1b"))
    config = panel.config(split=(2,))
    assert (config.strategy, config.micro_batches, config.schedule, config.split) == ("pipeline", 8, "1f1b", (2,))
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("ddp"))
    assert not panel.mb_row.isVisible()
    assert panel.config(split=(2,)).split is None and panel.config().micro_batches is None
    from app.state.problem_help import explain_all
    from engine.problems import Problem
    shown = panel.show_problems(explain_all([Problem("micro_batches", "must divide the batch size 64"),
                                             Problem("devices", "'cuda:3' does not exist")], panel.config()))
    assert panel.problems["devices"].isVisible()
    assert "Devices: 'cuda:3' does not exist" in panel.problems["devices"].text()
    assert len(shown) == 2
    panel.show_problems([])
    assert not panel.problems["devices"].isVisible()


def test_settings_round_trip(qtbot, qapp_configured):
    from app.settings import make_settings
    from app.views.experiment_panel import ExperimentPanel
    a = ExperimentPanel(cores=2)
    qtbot.addWidget(a)
    a.strategy_combo.setCurrentIndex(a.strategy_combo.findData("pipeline"))
    a.devices_combo.setCurrentText("cpu:3")
    a.mb_spin.setValue(8)
    a.batch_spin.setValue(96)
    a.steps_spin.setValue(11)
    a.nodes_row.set_token_file("/somewhere/token")
    a.nodes_row.set_nodes("10.0.0.2:29400,10.0.0.3:29400")  # a comma: QSettings must keep it one string
    a.model_combo.set_torchvision_model("torchvision:resnet18")
    a.image_spin.setValue(64)
    a.schedule_combo.setCurrentIndex(a.schedule_combo.findData("zbv"))
    a.input_combo.setCurrentIndex(a.input_combo.findData("in-step"))
    a.optimizer_combo.setCurrentIndex(a.optimizer_combo.findData("adamw"))
    a.batch_spin.setValue(96)
    settings = make_settings()
    a.save(settings)
    settings.sync()
    b = ExperimentPanel(cores=2)
    qtbot.addWidget(b)
    b.restore(make_settings())
    assert b.config() == a.config()   # every option, through the config's one declaration
    assert b.config().nodes == "10.0.0.2:29400,10.0.0.3:29400" and b.config().token_file == "/somewhere/token"
    assert (b.config().model, b.config().image_size, b.config().schedule, b.config().input_prep) == \
        ("torchvision:resnet18", 64, "zbv", "in-step")
    # The form's own state beside it: a pipeline's micro-batching kept while another strategy is picked.
    a.strategy_combo.setCurrentIndex(a.strategy_combo.findData("ddp"))
    a.save(settings)
    settings.sync()
    c = ExperimentPanel(cores=2)
    qtbot.addWidget(c)
    c.restore(make_settings())
    assert c.config().strategy == "ddp" and c.mb_spin.value() == 8
    # A first start (nothing stored) is the tutorial's naive split on two CPU devices.
    settings.clear()
    settings.sync()
    d = ExperimentPanel(cores=2)
    qtbot.addWidget(d)
    d.restore(make_settings())
    assert (d.config().strategy, d.config().devices) == ("model-parallel", "cpu:2")


def test_a_new_token_file_is_written_for_the_owner_alone_and_never_over_another(qtbot, qapp_configured, tmp_path):
    import stat

    from app.views.nodes_row import NodesRow
    from engine.nodes.token import read_token
    row = NodesRow()
    qtbot.addWidget(row)
    row.set_nodes("10.0.0.2:29400")
    path = tmp_path / "keys" / "team-token"
    row._new_token_file(str(path))                  # the save dialog's answer
    assert row.token_file() == str(path) and len(read_token(path)) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = path.read_text()
    row._new_token_file(str(path))                  # the same name again: refused, said, the file kept
    assert path.read_text() == before and not row.token_error.isHidden()
    assert "never overwritten" in row.token_error.text()


def test_the_model_file_dialog_starts_in_the_examples_the_first_time(qtbot, qapp_configured, monkeypatch):
    from PySide6 import QtWidgets

    from app.views.experiment_panel import ExperimentPanel
    from app.views.model_box import OPEN_FILE
    asked = []

    def answer(_parent, _title, start, _filters):
        asked.append(start)
        return str(Path(start) / "tiny_transformer.py"), ""
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", answer)
    panel = ExperimentPanel(cores=2)
    qtbot.addWidget(panel)
    panel.model_combo._on_activated(panel.model_combo.findData(OPEN_FILE))
    assert Path(asked[0]).name == "examples" and (Path(asked[0]) / "tiny_transformer.py").is_file()
    panel.model_combo._on_activated(panel.model_combo.findData(OPEN_FILE))
    assert asked[1] == asked[0]   # then where the last file was


# -- history ---------------------------------------------------------------------------------------

def test_history_lists_runs_and_loads_several_for_comparison(qtbot, qapp_configured, panel, tmp_path):
    from PySide6 import QtCore

    from app.views.history_panel import HistoryPanel
    from engine.store import Store
    store = Store(tmp_path / "history.sqlite3")
    ids = []
    for r, strategy in enumerate(("model-parallel", "pipeline")):
        run_id = store.create_run({"strategy": strategy, "model": "mlp", "width": 64, "depth": 4,
                                   "devices": "cpu:2", "split": [2]})
        store.add_steps(run_id, [step_event(s) for s in range(6)])
        store.add_samples(run_id, [{"t": k * 0.1, "device": f"cpu:{d}", "util": 40.0 + r, "mem_used": 1e9}
                                   for k in range(20) for d in range(2)])
        store.finish_run(run_id, "finished", from_json(RunSummary, {
            "devices": ["cpu:0", "cpu:1"], "split": [2], "micro_batches": 4 if r else None,
            "step_time_s": {"mean": 0.1, "std": 0.0}, "throughput": {"mean": 640.0 + r, "std": 1.0},
            "bubble": {"measured": 0.5 - 0.2 * r, "theory": 0.5 - 0.3 * r}, "devices_busy": [0.5, 0.5],
            "stage_busy": [0.5, 0.5], "stage_balance": 0.8 + 0.1 * r, "loss": {"first": 2.3, "last": 1.8}}))
        ids.append(run_id)
    failed = store.create_run({"strategy": "ddp", "model": "mlp", "devices": "cpu:2"})
    store.finish_run(failed, "failed", None, "rank 1 (cpu:1) was killed by SIGKILL")
    history = HistoryPanel(store)
    qtbot.addWidget(history)
    history.refresh()
    assert history.run_ids() == [failed, ids[1], ids[0]]  # newest first
    texts = [history.table.item(1, c).text() for c in range(history.table.columnCount())]
    assert "pipeline" in texts and "641" in texts and "30.0% / 20.0%" in texts and "0.90" in texts
    assert "SIGKILL" in history.table.item(0, history.table.columnCount() - 1).text()

    emitted = []
    history.sigSelectionChanged.connect(emitted.append)
    history.table.selectRow(1)
    history.table.selectionModel().select(  # Ctrl+click on a second run
        history.table.model().index(2, 0),
        QtCore.QItemSelectionModel.SelectionFlag.Select | QtCore.QItemSelectionModel.SelectionFlag.Rows)
    assert sorted(emitted[-1]) == sorted(ids) == sorted(history.selected_ids())
    with qtbot.waitSignal(history.sigLoaded, timeout=10_000) as loaded:
        history.load(emitted[-1])
    runs = loaded.args[1]
    assert [r.run_id for r in runs] == emitted[-1]
    assert all(len(r.steps) == 6 and len(r.samples) == 40 and r.timeline for r in runs)
    panel.show_runs(runs)
    assert len(panel.series_plots["throughput"].series_keys()) == 2
    assert len(panel.series_plots["utilization"].series_keys()) == 4
    store.close()


def test_detected_gpus_are_offered_by_name_and_memory(qtbot, qapp_configured):
    from PySide6 import QtCore

    from app.views.experiment_panel import ExperimentPanel
    panel = ExperimentPanel(cores=16)
    qtbot.addWidget(panel)
    # As with CUDA_VISIBLE_DEVICES=1,0: NVML's GPU 1 is cuda:0, and its GPU 2 is hidden from runs.
    from engine.telemetry.gpu_inventory import GpuInfo
    panel.set_gpus([GpuInfo(0, cuda_index=1, name="NVIDIA H200", memory_total=141 * 2**30),
                    GpuInfo(1, cuda_index=0, name="NVIDIA H100", memory_total=80 * 2**30),
                    GpuInfo(2, cuda_index=None, name="NVIDIA L4", memory_total=24 * 2**30)])
    choices = [panel.devices_combo.itemData(i) for i in range(panel.devices_combo.count())]
    assert {"auto", "cpu:2", "cpu:16", "cuda:0", "cuda:0,cuda:1", "cpu,cuda:0"} <= set(choices)
    assert not any("cuda:2" in choice for choice in choices)
    assert panel.devices_combo.itemData(choices.index("cuda:0"), QtCore.Qt.ItemDataRole.ToolTipRole) == "NVIDIA H100"
    info = panel.devices_info.text()
    assert "cuda:0 NVIDIA H100, 80 GiB" in info and "GPU 2 (hidden by CUDA_VISIBLE_DEVICES) NVIDIA L4" in info
    assert panel.devices_combo.spec() == "cpu:2"  # the choice survives the inventory arriving


def test_a_stored_runs_tensor_memory_tells_a_split_from_replicas(panel):
    """The process's memory is mostly torch itself; what the tensors hold on each device tells model-parallel
    (a part of the model each) from ddp (the whole model on each), under the plots."""
    from app.state.stored_run import RunData
    from engine.results import TensorMemory
    mib = 2 ** 20

    def stored(strategy: str, params: list[int]) -> RunData:
        summary = RunSummary(strategy=strategy, devices=["cpu:0", "cpu:1"],
                             tensor_memory=[TensorMemory(params=p * mib, grads=p * mib) for p in params])
        return RunData(run_id=strategy, label=strategy, status="finished", config=ExperimentConfig(strategy=strategy),
                       summary=summary, error=None)

    panel.show_runs([stored("model-parallel", [1, 1])])
    split = "\n".join(panel.findings.texts())
    panel.show_runs([stored("ddp", [2, 2])])
    replicas = "\n".join(panel.findings.texts())
    assert "tensors cpu:0: 2 MiB (params 1, grads 1" in split and "tensors cpu:1: 2 MiB" in split
    assert "tensors cpu:0: 4 MiB (params 2, grads 2" in replicas and "tensors cpu:1: 4 MiB" in replicas


def test_a_gpus_sm_activity_is_drawn_dotted_beside_its_utilization_live(qtbot, qapp_configured):
    """A GPU whose telemetry has GPM's SM activity: the live Utilization plot draws it beside the GPU's
    utilization, in its colour, named in the legend; a CPU device has none."""
    from app.state.live_data import TelemetryHistory
    from app.views.plots.panel import PlotPanel
    from app.views.plots.telemetry_redraw import SM_PREFIX
    now = time.perf_counter()
    telemetry = TelemetryHistory(10.0, origin=now - 10)
    telemetry.add([SimpleNamespace(t=now - 10 + k * 0.1, device=device, util=100.0, mem_used=1e9, mem_total=8e9,
                                   sm_active=20.0 if device == "cuda:0" else None)
                   for k in range(50) for device in ("cuda:0", "core 1")])
    panel = PlotPanel(telemetry)
    qtbot.addWidget(panel)
    panel.redraw(force=True)
    plot = panel.series_plots["utilization"]
    assert SM_PREFIX + "cuda:0" in plot.series_keys() and SM_PREFIX + "core 1" not in plot.series_keys()
    assert "cuda:0 SM activity" in plot.legend_names()
    assert set(plot.series_data(SM_PREFIX + "cuda:0")[1]) == {20.0}


def test_a_blocks_flops_are_in_its_time_cells_tooltip(qtbot, qapp_configured):
    """The planner's per-block FLOPs (engine/planner/planning.py BlockInfo.flops, per sample) reach the split view,
    per micro-batch, in the tooltip of the block's time (the panel has no room for another column)."""
    from app.views.split_view import SplitView
    from engine.planner.planning import BlockInfo
    view = SplitView()
    qtbot.addWidget(view)
    view.set_context(True, 2, micro_batch_size=8)
    view.set_blocks([BlockInfo("layer0", 10, 0.002, 64, "Linear", 1.5e6), BlockInfo("layer1", 10, 0.002, 64)], [1])
    assert "12 MFLOP per micro-batch of 8" in view.table.item(0, 3).toolTip()
