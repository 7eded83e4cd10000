"""Sixty-four devices on eight nodes in the Plots tab (issue 34): heatmaps grouped by node, the devices to look at
first, a timeline folded node by node, and one device picked everywhere at once. Synthetic ranks: the panel is
fed as a run over eight machines feeds it (telemetry buffers, merged steps, a stored run's summary)."""
from __future__ import annotations

import time

import numpy as np
import pytest
from PySide6 import QtCore

from engine.config import ExperimentConfig
from engine.results import DeviceKinds, RunSummary, Sample, Step

NAMES = [f"node{n}/cuda:{d}" for n in range(8) for d in range(8)]
IDLE = "node5/cuda:3"          # busy a tenth of each step, the others all of it
NODES = [f"node{n}" for n in range(8)]


def step(number: int) -> Step:
    start = number * 0.1
    intervals = {name: [["forward", start, start + 0.01]] if name == IDLE else
                 [["forward", start, start + 0.04], ["backward", start + 0.04, start + 0.1]] for name in NAMES}
    return Step(step=number, throughput=640.0, loss=1.0, time_s=0.1, intervals=intervals,
                busy={name: 0.1 if name == IDLE else 1.0 for name in NAMES})


@pytest.fixture
def panel(qtbot, qapp_configured):
    from app.state.live_data import RunProgress, TelemetryHistory
    from app.views.plots.panel import PlotPanel
    now = time.perf_counter()
    telemetry = TelemetryHistory(10.0, origin=now - 60)
    t = 59.9 - np.arange(600)[::-1] / 10
    for name in NAMES:
        util = np.full(600, 5.0 if name == IDLE else 90.0)
        telemetry._buffer(telemetry.util, name).extend(np.column_stack([t, util]))
        telemetry._buffer(telemetry.mem, name).extend(np.column_stack([t, np.full(600, 2.0 * 2 ** 30)]))
    p = PlotPanel(telemetry)
    qtbot.addWidget(p)
    p.resize(1400, 900)
    p.show()
    progress = RunProgress(run_id="many", config=ExperimentConfig(strategy="ddp"), devices=NAMES, steps_total=10)
    p.begin_run(progress)
    for number in range(3):
        p.add_step(step(number))
    progress.busy = step(2).busy
    p.redraw(force=True)
    return p


def left_labels(plot) -> list[str]:
    return [text for _, text in plot.getPlotItem().getAxis("left")._tickLevels[0]]


def test_sixty_four_devices_are_a_heatmap_grouped_by_node_with_the_idle_device_first_in_the_outliers(panel, qtbot,
                                                                                                    tmp_path):
    heat = panel.heatmaps["utilization"]
    assert panel.telemetry_redraw.heat
    assert heat.isVisibleTo(panel) and not panel.series_plots["utilization"].isVisibleTo(panel)
    assert heat.devices == NAMES and left_labels(heat.view) == NODES   # a row per device, labelled by node
    figure = heat.to_figure()
    assert [block[1:] for block in figure.heat.groups()] == [(8 * n, 8) for n in range(8)]
    rows = {device: np.nanmean(np.array(values, dtype=float)) for device, values in
            zip(figure.heat.devices, figure.heat.values, strict=True)}
    assert rows[IDLE] == pytest.approx(5.0) and rows["node5/cuda:2"] == pytest.approx(90.0)
    # Each node's mean above it: node5's carries its idle device.
    means = {s.name: np.nanmean(np.array(s.y, dtype=float)) for s in figure.series}
    assert list(means) == [f"{node} mean" for node in NODES]
    assert means["node5 mean"] == pytest.approx((7 * 90 + 5) / 8) and means["node4 mean"] == pytest.approx(90.0)
    # The cursor on the idle device's row names it and its value.
    row = NAMES.index(IDLE)   # a column with a sample (the clock has moved on since they were fed)
    column = np.flatnonzero(np.isfinite(heat._matrix[row]))[-1]
    found = heat.cell_at(heat._x0 + heat._dx * (column + 0.5), row)
    assert found is not None and IDLE in found.text and "utilization 5 %" in found.text
    # The devices to look at first: the idle one, and nothing else stands out.
    assert panel.outliers.isVisibleTo(panel)
    assert panel.outliers.texts() == [f"{IDLE} idles 90 % of each step (median device 0 %)"]
    # File › Export of the utilization plot writes what is shown: the heatmap.
    path = panel.series_plots["utilization"].export("svg", tmp_path / "utilization.svg")
    assert path is not None and 'id="utilization/heat"' in path.read_text()


def test_in_a_laptops_plots_area_each_device_has_three_pixels_every_node_its_name_and_one_time_axis(panel, qtbot):
    """The Plots tab of a 1280x800 window (about 840x590): 64 rows of at least 3 px, scrolled under the means plot
    where they do not fit; each node named; the means' time axis over the rows' time, pixel for pixel; a constant
    throughput reads flat, not as an axis of 640.0 +/- 0.4."""
    panel.resize(840, 590)
    panel.redraw(force=True)
    qtbot.wait(50)
    for heat in panel.heatmaps.values():
        rows_px = heat.view.getViewBox().height() / len(NAMES)
        assert rows_px >= 3, rows_px
        assert left_labels(heat.view) == NODES
        means_box, rows_box = heat.means.getPlotItem().getViewBox(), heat.view.getViewBox()
        left = [box.mapToDevice(box.mapFromView(QtCore.QPointF(-30, 0))) for box in (means_box, rows_box)]
        right = [box.mapToDevice(box.mapFromView(QtCore.QPointF(-1, 0))) for box in (means_box, rows_box)]
        on_screen = [box.scene().views()[0].mapToGlobal(point.toPoint()).x()
                     for box, point in zip((means_box, rows_box, means_box, rows_box), left + right, strict=True)]
        assert abs(on_screen[0] - on_screen[1]) <= 1 and abs(on_screen[2] - on_screen[3]) <= 1, on_screen
    # the timeline's eight folded nodes each named too (a smaller font where a lane is short)
    assert [label.split(" ")[0] for label in left_labels(panel.timeline)] == NODES, left_labels(panel.timeline)
    low, high = panel.series_plots["throughput"].getPlotItem().getViewBox().viewRange()[1]
    assert high - low >= 0.2 * 640.0 and low < 640.0 < high, (low, high)


def test_a_device_picked_in_the_outlier_list_is_highlighted_in_the_heatmaps_and_the_timeline(panel, qtbot):
    outliers = panel.outliers.list
    item = outliers.item(0)
    qtbot.mouseClick(outliers.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=outliers.visualItemRect(item).center())
    for heat in panel.heatmaps.values():
        assert heat.selected == IDLE
        assert heat.means.series_name("selected") == IDLE   # its own series over the node means
    assert panel.timeline.highlighted == IDLE
    assert panel.timeline._highlight.isVisible()
    # Another device picked in a heatmap: its series is named by it, and the timeline's band moves to it.
    heat = panel.heatmaps["utilization"]
    heat.select("node0/cuda:1")
    assert heat.means.series_name("selected") == "node0/cuda:1"
    # A second click lets it go, everywhere.
    qtbot.mouseClick(outliers.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=outliers.visualItemRect(item).center())
    assert all(heat.selected is None for heat in panel.heatmaps.values()) and panel.timeline.highlighted is None


def test_the_timeline_folds_each_node_into_a_lane_and_a_click_unfolds_it(panel, qtbot):
    timeline = panel.timeline
    assert [key for key, _ in timeline.lanes] == NODES   # 64 lanes could not be read: a lane per node
    labels = timeline.labels
    assert labels[0] == "node0 ▸ 8  100%" and labels[5] == f"node5 ▸ 8  {100 * (7 + 0.1) / 8:.0f}%"
    # The folded lane shades each moment by the share of its devices busy: node5 has one of 8 idle.
    assert timeline.bars.node_busy["node0"].max() == pytest.approx(1.0)
    assert timeline.bars.node_busy["node5"].max() == pytest.approx(1.0)   # the first hundredth: all eight busy
    assert timeline.bars.node_busy["node5"][len(timeline.bars.node_busy["node5"]) // 2] == pytest.approx(7 / 8)
    # A click on node5's lane unfolds it: its eight devices, each in a lane of its own.
    view = timeline.getPlotItem().getViewBox()
    at = timeline.mapFromScene(view.mapViewToScene(QtCore.QPointF(0.05, 5)))
    qtbot.mouseClick(timeline.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=at)
    assert [key for key, _ in timeline.lanes] == NODES[:5] + NAMES[40:48] + NODES[6:]
    assert timeline.labels[5 + 3] == "cuda:3  10%"   # the idle device's own lane, its share beside it
    # The idle device's bars are in its own lane now.
    bars = timeline.bars.by_kind["forward"].opts
    assert 5 + 3 in {int(round(y + bars["height"][0] / 2)) for y in bars["y0"]}
    # A device picked keeps its band on its lane as the lanes move.
    timeline.highlight(IDLE)
    timeline.collapse("node5")
    assert timeline._highlight.getRegion() == pytest.approx((4.5, 5.5))
    timeline.collapse("node5", False)
    assert timeline._highlight.getRegion() == pytest.approx((7.5, 8.5))
    # The context menu folds every node again.
    action = next(a for a in view.menu.actions() if a.text() == "Collapse every node to one lane")
    action.trigger()
    assert [key for key, _ in timeline.lanes] == NODES


def test_a_stored_run_of_sixty_four_devices_shows_its_heatmaps_and_outliers(panel, qtbot):
    from app.state.stored_run import RunData
    samples = [Sample(t=k * 0.5, device=name, util=5.0 if name == IDLE else 80.0, mem_used=2 ** 31, mem_total=2 ** 34)
               for k in range(40) for name in NAMES]
    kinds = [DeviceKinds(name, 0.1, {"forward": 0.01 if name == IDLE else 0.1}, 0.09 if name == IDLE else 0.0)
             for name in NAMES]
    summary = RunSummary(run_id="stored", strategy="ddp", devices=NAMES, devices_busy=[0.1 if n == IDLE else 1.0
                                                                                     for n in NAMES],
                         time_by_kind=kinds)
    run = RunData("stored", "stored run", "finished", ExperimentConfig(strategy="ddp"), summary, None,
                  steps=[step(n) for n in range(3)], samples=samples, step_count=3)
    panel.show_runs([run])
    heat = panel.heatmaps["memory"]
    assert heat.isVisibleTo(panel) and heat.figure is not None and heat.figure.heat is not None
    # every node named once the plots have made room for the run's findings under them (a layout pass later)
    qtbot.waitUntil(lambda: left_labels(heat.view) == NODES, timeout=2_000)
    assert len(heat.figure.heat.groups()) == 8
    utilization = panel.heatmaps["utilization"].figure.heat
    assert utilization.values[NAMES.index(IDLE)][0] == pytest.approx(5.0)
    assert panel.outliers.texts()[0].startswith(f"{IDLE} idles 90 %")
    # Back to live: the live heatmaps again, their time counted back from now.
    panel.set_mode("live")
    live = panel.heatmaps["utilization"]
    assert live.figure is None and panel.telemetry_redraw.heat and live.x_origin is not None
    found = live.cell_at(panel.now() - 5, NAMES.index(IDLE))
    assert found is not None and "time from now -5 s" in found.text


def test_a_machines_many_idle_cores_and_a_run_of_two_cpu_devices_stay_lines(qtbot, qapp_configured):
    """Heatmaps are for many devices of a run (or GPUs), not for the idle view's cores: a 16-core machine running
    on two of them draws two devices' lines, its memory too."""
    from app.state.live_data import RunProgress, TelemetryHistory
    from app.views.plots.panel import PlotPanel
    now = time.perf_counter()
    telemetry = TelemetryHistory(10.0, origin=now - 60)
    telemetry.set_physical({"cpu:0": "core 0", "cpu:1": "core 1"})
    t = 59.9 - np.arange(100)[::-1] / 10
    for core in range(16):
        telemetry._buffer(telemetry.util, f"core {core}").extend(np.column_stack([t, np.full(100, 30.0)]))
    for name in ("cpu:0", "cpu:1"):
        telemetry._buffer(telemetry.mem, name).extend(np.column_stack([t, np.full(100, 2.0 ** 30)]))
    panel = PlotPanel(telemetry)
    qtbot.addWidget(panel)
    panel.begin_run(RunProgress(run_id="two", config=ExperimentConfig(strategy="ddp"), devices=["cpu:0", "cpu:1"],
                                steps_total=10))
    panel.redraw(force=True)
    assert not panel.telemetry_redraw.heat
    assert set(panel.series_plots["memory"].series_keys()) == {"cpu:0", "cpu:1"}
