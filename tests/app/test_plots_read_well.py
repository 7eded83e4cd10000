"""The plots read as the data is: gaps stay gaps, labels never overprint, the cursor's value is named,
a device keeps its colour, steps are whole, and a plot's files match the plot and each other.

Offscreen, from fake data (no worker, no torch), reading the widgets' own state.
"""
from __future__ import annotations

import csv
import re
import time
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from app_helpers import shown
from drawn_svg import SVG, drawn
from engine.config import ExperimentConfig
from engine.results import ExperimentPoint, ExperimentResult, MeanStd, RunSummary, Sample, Step

MIB = 2 ** 20


def sample(t, device, util=50.0, mem=700 * MIB):
    return SimpleNamespace(t=t, device=device, util=util, mem_used=mem, mem_total=8e9)


@pytest.fixture
def panel(qtbot, qapp_configured):
    """A live panel whose core 0 and cpu:0 were sampled from 58 s ago to 45 s ago, then not for 40 s, then
    again for the last 5 s: a run in between sampled other devices, or the sampler was off."""
    from app.state.live_data import TelemetryHistory
    from app.views.plots.panel import PlotPanel
    now = time.perf_counter()
    telemetry = TelemetryHistory(10.0, origin=now - 120)
    before = [now - 58 + 0.1 * k for k in range(130)]
    after = [now - 5 + 0.1 * k for k in range(50)]
    telemetry.add([sample(t, "core 0", util=20.0, mem=None) for t in before]
                  + [sample(t, "cpu:0", util=None) for t in before])
    telemetry.add([sample(t, "core 0", util=100.0, mem=None) for t in after]
                  + [sample(t, "cpu:0", util=None, mem=0.0) for t in after])
    p = PlotPanel(telemetry)
    qtbot.addWidget(p)
    p.resize(1200, 800)
    p.show()
    qtbot.waitExposed(p)
    p.redraw(force=True)
    qapp_configured.processEvents()
    return p


def stored_run(run_id: str, label: str, micro_batches: int, devices=("cpu:0", "cpu:1"), gap: bool = False):
    from app.state.stored_run import RunData
    times = [0.1 * k for k in range(30)] + ([45 + 0.1 * k for k in range(30)] if gap else [])
    return RunData(run_id=run_id, label=label, status="finished",
                   config=ExperimentConfig(strategy="pipeline", devices=f"cpu:{len(devices)}", micro_batches=micro_batches),
                   summary=RunSummary(devices=list(devices), micro_batches=micro_batches,
                                      devices_busy=[0.7] * len(devices)),
                   error=None, steps=[Step(step=s, throughput=100.0 + s, loss=2.0 - 0.1 * s) for s in range(5)],
                   timeline=[(s, devices[0], "forward", s * 0.1, s * 0.1 + 0.05) for s in range(5)],
                   samples=[Sample(t=t, device=d, util=50.0, mem_used=(700 if t < 10 else 0) * MIB)
                            for t in times for d in devices])


def gap_broken(y: np.ndarray) -> bool:
    """One NaN between numbers: the line breaks once, and the points on both sides are drawn."""
    missing = np.flatnonzero(~np.isfinite(y))
    return len(missing) == 1 and 0 < missing[0] < len(y) - 1


def stroke(curve: ET.Element) -> str:
    return re.search(r"stroke: (#[0-9a-f]{6})", next(curve.iter(f"{SVG}path")).get("style")).group(1)


def pen_color(plot, key: str) -> str:
    return plot._curves[key].opts["pen"].color().name()


# -- 1. a gap is a gap ------------------------------------------------------------------------------
def test_live_lines_break_where_no_samples_came(panel):
    utilization, memory = panel.series_plots["utilization"], panel.series_plots["memory"]
    for plot, key in ((utilization, "core 0"), (utilization, "raw core 0"), (memory, "cpu:0")):
        x, y = plot.series_data(key)
        assert gap_broken(y), key
        i = int(np.flatnonzero(~np.isfinite(y))[0])
        assert x[i - 1] < x[i] < x[i + 1] and x[i + 1] - x[i - 1] > 30, key   # the break is in the 40-s hole
        # What pyqtgraph draws (the visible samples, app/views/plots/peak_curve.py): the two sides unjoined.
        curve = plot._curves[key]
        connect, drawn_x = curve.opts["connect"], curve.xData
        assert isinstance(connect, np.ndarray), key
        (unjoined,) = np.flatnonzero(~connect[:-1])
        assert (drawn_x[unjoined], drawn_x[unjoined + 1]) == (x[i - 1], x[i + 1]), key
    assert panel.series_plots["memory"].point_count() == 180   # the samples; the break is none


def test_stored_lines_break_where_no_samples_were_taken(panel):
    panel.show_runs([stored_run("r1", "12:00:00 pipeline", 4, gap=True)])
    for plot in (panel.series_plots["utilization"], panel.series_plots["memory"]):
        for device in ("cpu:0", "cpu:1"):
            assert gap_broken(plot.series_data(device)[1]), (plot.spec.name, device)


def test_an_exported_live_plot_keeps_the_gap(panel, tmp_path):
    root = ET.parse(panel.series_plots["memory"].export("svg", tmp_path / "memory.svg")).getroot()
    curve = drawn(root, "series")["cpu:0"]
    assert next(curve.iter(f"{SVG}path")).get("d").count("M") == 2   # two pieces: before and after the gap


# -- 2. labels never overprint ------------------------------------------------------------------------
def visible_labels(panel, plot):
    return [line.label for line in panel.run_marks.lines[plot] if line.label.isVisible()]


def test_close_run_markers_stack_and_never_overprint(panel, qapp_configured):
    now = panel.now()
    panel.mark_run(now - 30, "run 182154")
    panel.mark_run(now - 29.5, "end")
    panel.redraw(force=True)
    qapp_configured.processEvents()
    start, end = visible_labels(panel, panel.series_plots["utilization"])
    assert start.orthoPos != end.orthoPos
    assert not start.sceneBoundingRect().intersects(end.sceneBoundingRect())
    # an experiment's short runs: a start and an end every two seconds
    for k in range(6):
        panel.mark_run(now - 20 + 2 * k, f"run 18{k}")
        panel.mark_run(now - 19 + 2 * k, "end")
    panel.redraw(force=True)
    qapp_configured.processEvents()
    for plot in (panel.series_plots["utilization"], panel.series_plots["memory"]):
        labels = visible_labels(panel, plot)
        assert 0 < len(labels) < len(panel.run_marks.lines[plot])   # some left out, their lines kept
        rects = [label.sceneBoundingRect() for label in labels]
        assert not any(a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:])


def test_the_legend_has_its_own_row_and_can_be_hidden(panel, qapp_configured):
    plot = panel.series_plots["utilization"]
    view = plot.getPlotItem().getViewBox()
    assert plot.legend.isVisible() and plot.legend_names() == ["core 0"]
    legend = plot.legend.sceneBoundingRect()
    assert legend.height() > 0 and not legend.intersects(view.sceneBoundingRect())
    assert legend.bottom() <= view.sceneBoundingRect().top()   # above the curves
    tall = view.height()
    assert "Show legend" in [a.text() for a in view.menu.actions()]
    plot.legend.action.trigger()      # the context menu's "Show legend", unchecked
    qapp_configured.processEvents()
    assert not plot.legend.isVisible() and view.height() > tall   # its row went to the curves
    plot.legend.action.trigger()
    qapp_configured.processEvents()
    assert plot.legend.isVisible()


def test_on_a_1280x800_screen_the_plots_keep_a_data_area_to_read(qtbot, qapp_configured):
    from app.main_window import MainWindow
    from app.views.plots.live_grid import PLOT_MIN_HEIGHT
    win = shown(qtbot, MainWindow(start_services=False), (1280, 800))
    now = time.perf_counter()
    win.telemetry.add([sample(now - 5 + 0.1 * k, f"core {c}") for k in range(50) for c in range(8)])
    win.plots.redraw(force=True)
    qapp_configured.processEvents()
    for name in ("utilization", "memory", "throughput", "loss"):
        plot = win.plots.plots[name]
        view = plot.getPlotItem().getViewBox()
        assert plot.height() >= PLOT_MIN_HEIGHT, (name, plot.height())
        assert view.height() >= 60, (name, view.height())
        assert not plot.legend.sceneBoundingRect().intersects(view.sceneBoundingRect()), name
    win.shutdown()


def test_on_a_1280x800_screen_many_notes_scroll_and_the_window_keeps_its_size(qtbot, qapp_configured):
    """A run's findings and notes (nodes, tensor memory, a disturbance, a disagreement) scroll in the findings
    panel under the plots: in the bubble box they grew the box, the window past the screen, and the status bar
    fell off it. The panel keeps the height of its first three rows."""
    from app.main_window import MainWindow
    from app.state.finding_rows import FindingRow
    win = shown(qtbot, MainWindow(start_services=False), (1280, 800))
    rows = [FindingRow("note", "info", f"note {k}: other programs took 35% of cpu:1 during this run: its times are "
                                       "not comparable") for k in range(30)]
    win.plots.findings.show_rows(rows)
    qapp_configured.processEvents()
    assert win.minimumSizeHint().height() <= 800 and win.height() <= 800, (win.minimumSizeHint(), win.height())
    assert win.statusBar().isVisible() and win.statusBar().geometry().bottom() < win.height()
    panel = win.plots.findings
    assert panel.scroll.verticalScrollBar().maximum() > 0 and panel.first_row_in_view()   # the rest scroll
    assert "note 29" in panel.texts()[-1]
    win.shutdown()


def test_on_a_1280x800_screen_the_bubble_box_shows_its_figures_and_whole_legend(qtbot, qapp_configured):
    """The big figures at their style sheet's height and the legend at its wrapped height, above each other:
    at 1280x800 both figures were cut in half, the formula drawn over them and the legend's last line lost."""
    from app.main_window import MainWindow
    room = QtGui.QGuiApplication.primaryScreen().availableGeometry()
    first = MainWindow(start_services=False)   # its first size: within the screen, unless less than its minimum
    size, least = first.size(), first.minimumSizeHint()
    first.shutdown()
    assert size.width() <= max(room.width(), least.width()) and size.height() <= max(room.height(), least.height()), \
        (size, room)
    win = shown(qtbot, MainWindow(start_services=False), (1280, 800))
    box = win.plots.bubble
    box.show_figures(0.25, 0.2, "(p-1)/(m+p-1) = 1/5")
    qapp_configured.processEvents()
    for figure in (box.measured, box.theory):
        assert figure.height() >= figure.sizeHint().height(), (figure.height(), figure.sizeHint())
        assert figure.geometry().bottom() < box.formula.geometry().top()
    assert box.legend.height() >= box.legend.heightForWidth(box.legend.width()) and "idle" in box.legend.text()
    assert box.legend.geometry().bottom() <= box.contentsRect().bottom()
    # a kind of some runs only is named where the timeline draws it: a wait on DataLoader workers
    assert "data-wait" not in box.legend.text() and "backward" in box.legend.text()
    box.show_legend(frozenset({"data-wait"}))
    assert "data-wait" in box.legend.text()
    win.shutdown()


def test_a_title_longer_than_its_plot_is_cut_to_it_and_whole_in_its_tooltip(qtbot, qapp_configured):
    """The Memory tab's titles at 1280x800 widened their plots' scenes past the views: the second device's bar
    and the right of the plot were lost."""
    from app.views.memory_view import StackedBars
    from engine.figures.run import TENSOR_MEMORY
    plot = shown(qtbot, StackedBars(TENSOR_MEMORY), (300, 260))
    qapp_configured.processEvents()
    label = plot.getPlotItem().titleLabel
    assert "…" in label.text and label.toolTip() == TENSOR_MEMORY.title
    assert plot.getPlotItem().sceneBoundingRect().width() <= plot.viewport().width()
    plot.resize(900, 260)   # room for it all: whole again
    qapp_configured.processEvents()
    assert TENSOR_MEMORY.title in label.text and label.toolTip() == ""


def test_runs_compared_name_what_differs(panel):
    panel.show_runs([stored_run("r1", "18:29:22 pipeline", 8), stored_run("r2", "18:22:33 pipeline", 4)])
    assert panel.series_plots["throughput"].legend_names() == ["pipeline m=8", "pipeline m=4"]
    assert panel.series_plots["utilization"].legend_names()[0] == "pipeline m=8 cpu:0"


# -- 3. hover ------------------------------------------------------------------------------------------
def hover(plot, x: float, y: float) -> str:
    """Move the cursor over view position (x, y) as the scene reports it (the proxy's slot)."""
    QtWidgets.QApplication.processEvents()   # the view's range and layout as painted
    scene_pos = plot.getPlotItem().getViewBox().mapViewToScene(QtCore.QPointF(x, y))
    plot.hover.moved((scene_pos,))
    return plot.hover.text()


def test_hover_names_the_point_under_the_cursor(panel):
    x, y = panel.series_plots["utilization"].series_data("core 0")
    text = hover(panel.series_plots["utilization"], x[-3], y[-3])
    assert text.startswith("core 0\n") and re.search(r"\ntime from now -[\d.]+ s\n", text), text
    assert text.endswith("\nutilization 100 %"), text
    assert panel.series_plots["utilization"].hover.label.isVisible()
    # the last of the earlier samples (58 to 45 s ago): the window's left edge moves on with the clock
    memory_x, memory_y = panel.series_plots["memory"].series_data("cpu:0")
    text = hover(panel.series_plots["memory"], memory_x[np.flatnonzero(memory_y == 700.0)[-1]], 700.0)
    assert text.startswith("cpu:0\n") and text.endswith("memory used 700 MiB")
    (left, right), (bottom, top) = panel.series_plots["memory"].getPlotItem().getViewBox().viewRange()
    assert hover(panel.series_plots["memory"], (left + right) / 2, (bottom + top) / 2) == ""   # in the gap: nothing
    panel.show_runs([stored_run("r1", "12:00:00 pipeline", 4)])
    assert hover(panel.series_plots["throughput"], 3, 103.0) == "throughput\nstep 3\nthroughput 103 samples/s"


def test_hover_names_the_timeline_interval_under_the_cursor(qtbot, qapp_configured):
    from app.views.plots.timeline_view import TimelineView
    view = shown(qtbot, TimelineView(), (600, 240))
    view.set_rows([(7, "cpu:0", "forward", 1.000, 1.004), (7, "cpu:0", "forward", 1.006, 1.010),
                   (7, "cpu:1", "backward", 1.004, 1.008)])
    qapp_configured.processEvents()
    assert hover(view, 0.007, 0.0) == "cpu:0 · forward\nstep 7, forward 2 of 2\n4 ms from 6 ms"
    assert hover(view, 0.005, 1.0) == "cpu:1 · backward\nstep 7\n4 ms from 4 ms"
    assert hover(view, 0.005, 0.0) == "cpu:0 · idle\nstep 7\n2 ms"
    assert hover(view, 0.005, 0.5) == ""   # between the lanes
    # with the run's schedule plan, a compute interval names its stage and micro-batch
    view.set_plan([["0F0", "0F1"], ["", "1B0"]], ["cpu:0", "cpu:1"])
    assert hover(view, 0.007, 0.0) == ("cpu:0 · forward\nstep 7, forward 2 of 2\nstage 0, micro-batch 1 (0F1 in the "
                                       "plan)\n4 ms from 6 ms")
    view.set_plan([["0F0"], ["1B0"]], ["cpu:0", "cpu:1"])   # a plan the intervals do not follow: no names
    assert hover(view, 0.007, 0.0) == "cpu:0 · forward\nstep 7, forward 2 of 2\n4 ms from 6 ms"


# -- 4. colours, whole steps, fresh ranges ---------------------------------------------------------------
def test_a_device_has_one_colour_live_stored_and_exported(panel, tmp_path):
    from engine.figures import palette
    now = time.perf_counter()
    panel.telemetry.add([sample(now - 1 + 0.1 * k, "cpu:1", util=None) for k in range(10)])   # a run on cpu:1 alone
    panel.redraw(force=True)
    live = pen_color(panel.series_plots["memory"], "cpu:1")
    panel.show_runs([stored_run("r1", "12:00:00 pipeline", 4)])                             # a run on cpu:0, cpu:1
    stored = pen_color(panel.series_plots["memory"], "cpu:1")
    svg = panel.series_plots["memory"].export("svg", tmp_path / "m.svg")
    exported = stroke(drawn(ET.parse(svg).getroot(), "series")["cpu:1"])
    assert live == stored == exported == palette.device_color("cpu:1")


def test_a_five_step_run_has_whole_steps_on_its_axis(panel):
    from app.state.live_data import RunProgress
    panel.begin_run(RunProgress(run_id="r", devices=["cpu:0"], steps_total=5))
    for s in range(5):
        panel.add_step(Step(step=s, throughput=100.0 + s, loss=1.0))
    panel.redraw(force=True)
    for plot in (panel.series_plots["throughput"], panel.series_plots["loss"]):
        axis = plot.getPlotItem().getAxis("bottom")
        (low, high), _ = plot.getPlotItem().getViewBox().viewRange()
        ticks = [v for _, values in axis.tickValues(low, high, axis.width() or 400) for v in values]
        assert ticks and all(float(v).is_integer() for v in ticks), ticks
        assert {0.0, 4.0} <= set(ticks) and not any("." in t for t in axis.tickStrings(ticks, 1.0, 1.0))


def test_a_new_run_starts_its_step_plots_with_a_fresh_range(panel):
    from app.state.live_data import RunProgress
    panel.begin_run(RunProgress(run_id="a", devices=["cpu:0"], steps_total=5))
    for s in range(5):
        panel.add_step(Step(step=s, throughput=5000.0 + s, loss=40.0))
    panel.redraw(force=True)
    assert panel.series_plots["throughput"].getPlotItem().getViewBox().viewRange()[1][1] > 4000
    panel.begin_run(RunProgress(run_id="b", devices=["cpu:0"], steps_total=5))   # it fails before a step
    panel.redraw(force=True)
    for plot in (panel.series_plots["throughput"], panel.series_plots["loss"]):
        assert plot.getPlotItem().getViewBox().viewRange()[1][1] <= 1.5, plot.spec.name


# -- 5. exports match the screen and each other -----------------------------------------------------------
HEADER = re.compile(r"^[^_()]+( \([^()]+\))?$")   # "name" or "name (unit)": the exports' one style
UNITLESS = {"step", "series", "label", "strategy", "split", "micro-batches", "runs", "device", "kind", "loss"}


def assert_headers_have_units(rows, where):
    for i, name in enumerate(rows[0]):
        assert HEADER.match(name), (where, name)
        numbers = [r[i] for r in rows[1:] if re.fullmatch(r"-?[\d.e+-]+", r[i] or "")]
        if numbers and name not in UNITLESS:
            assert name.endswith(")"), (where, name)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_every_plots_csv_has_units_and_the_time_of_its_axis(panel, tmp_path):
    for name, plot in panel.plots.items():
        assert_headers_have_units(read_csv(plot.export("csv", tmp_path / f"{name}.csv")), name)
    util = read_csv(tmp_path / "utilization.csv")
    assert util[0] == ["series", "time from now (s)", "utilization (%)"]   # the axis the plot shows
    times = [float(r[1]) for r in util[1:]]
    assert -70 < min(times) < -50 and max(times) <= 0
    assert {r[0] for r in util[1:]} == {"core 0", "core 0 raw"}
    memory = read_csv(tmp_path / "memory.csv")
    assert memory[0][2] == "memory used (MiB)" and {r[2] for r in memory[1:]} == {"700", "0"}
    panel.show_runs([stored_run("r1", "12:00:00 pipeline", 4)])
    for name, plot in panel.plots.items():
        assert_headers_have_units(read_csv(plot.export("csv", tmp_path / f"stored-{name}.csv")), name)


def test_the_experiment_charts_csv_names_its_points(qtbot, qapp_configured, tmp_path):
    from app.views.experiment_results import ExperimentResultsView
    view = ExperimentResultsView()
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    qtbot.waitExposed(view)
    points = [ExperimentPoint(label=f"split size {s}", strategy="pipeline", x=s, run_ids=["r"],
                              step_time_s=MeanStd(0.1 * s, 0.01), throughput=MeanStd(640 / s, 1.0)) for s in (2, 4)]
    view.show_result(ExperimentResult(name="split-size", best="split size 2", points=points))
    for plot in (view.bars, view.sweep):
        rows = read_csv(plot.export("csv", tmp_path / f"{plot.export_name}.csv"))
        assert [r[0] for r in rows[1:]] == ["split size 2", "split size 4"], plot.export_name
        assert_headers_have_units(rows, plot.export_name)
    assert hover(view.bars, 0.0, 100.0).startswith("split size 2\nstep time 200 ms")   # over the first bar


def test_one_export_menu_on_every_plot(qtbot, panel):
    from app.views.plots.series_plot import SeriesPlot
    plot = SeriesPlot("t", "y")
    qtbot.addWidget(plot)
    for name, widget in {**panel.plots, "plain": plot}.items():
        view = widget.getPlotItem().getViewBox()
        # as the view builds it on a right click (ViewBox.raiseContextMenu): its menu, then its parents'
        menu = widget.scene().addParentContextMenus(view, view.getMenu(None), SimpleNamespace(acceptedItem=view))
        texts = [a.text() for a in menu.actions()]
        assert "Export..." not in texts and "Export CSV…" in texts, (name, texts)


def test_the_export_dialog_opens_in_the_last_folder(qtbot, panel, tmp_path, monkeypatch):
    from app.settings import last_folder
    from app.views.plots.series_plot import SeriesPlot
    chosen = tmp_path / "figures"
    chosen.mkdir()
    starts = []

    def save_dialog(parent, caption, start, *args, **kwargs):
        starts.append(start)
        return str(chosen / f"{len(starts)}.csv"), ""

    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", save_dialog)
    panel.series_plots["utilization"].export_actions["csv"].trigger()
    panel.timeline.export_actions["csv"].trigger()    # another plot: where the last export went
    later = SeriesPlot("t", "y", export_name="later")  # a plot made afterwards, as in the next launch
    qtbot.addWidget(later)
    later.export_actions["csv"].trigger()
    assert [s.rsplit("/", 1)[0] for s in starts[1:]] == [str(chosen), str(chosen)]
    assert last_folder() == str(chosen) and (chosen / "1.csv").exists()
