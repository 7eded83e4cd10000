"""Many devices' figures (issue 34): the heatmap's columns (engine/figures/heatmap.py, and the live view's
incremental ones, app/state/heat_columns.py), a folded node's busy shading, the outliers and the straggler
(engine/record/outliers.py), and a 64-device run's exported figures."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.state.heat_columns import HeatColumns
from app.state.ring_buffer import RingBuffer
from engine.export import csv_text, drawing
from engine.figures import RunView, run_figures
from engine.figures.heatmap import HEATMAP_FROM, column_means, heat_figure, nice_width, round_up
from engine.figures.run import UTILIZATION
from engine.figures.timeline import busy_columns
from engine.record.outliers import alike, outliers, step_kinds, straggler
from engine.results import DeviceKinds, RunSummary, Sample

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def test_column_widths_are_round_and_a_columns_mean_is_the_mean_of_its_samples():
    assert [nice_width(w) for w in (0.13, 0.2, 3.6, 7.0, 0.0)] == [0.2, 0.2, 5.0, 10.0, 1.0]
    assert [round_up(v) for v in (62464.0, 100.0, 0.0314)] == [63000.0, 100.0, 0.032]
    x = np.array([0.0, 0.1, 0.5, 0.55, 2.2])
    means = column_means(x, np.array([1.0, 3.0, 10.0, 20.0, 7.0]), 0.0, 0.5, 5)
    assert means[0] == 2.0 and means[1] == 15.0 and np.isnan(means[2]) and np.isnan(means[3]) and means[4] == 7.0


def test_the_live_columns_added_sample_by_sample_equal_those_computed_at_once():
    rng = np.random.default_rng(3)
    buffers = {}
    for d in range(6):
        t = np.sort(rng.uniform(0, 100, 2000))
        buffers[f"node{d // 3}/cuda:{d % 3}"] = buf = RingBuffer(1500)   # shorter than the samples: it wraps
        buf.extend(np.column_stack([t, rng.uniform(0, 100, len(t))]))
    columns = HeatColumns()
    names = list(buffers)
    for now in (100.0, 100.5, 101.3):
        for d, buf in enumerate(buffers.values()):
            buf.append(now - 0.01 * d - 0.003, 50.0 + d)   # off the columns' edges (where rounding decides)
        matrix, x0, dx = columns.matrix(buffers, names[::-1], now - 60, now, 400, 0.1)
        expected = np.array([column_means(buffers[n].column(0), buffers[n].column(1), x0, dx, matrix.shape[1])
                             for n in names[::-1]])
        assert dx == 0.2 and np.allclose(np.nan_to_num(matrix, nan=-1.0), np.nan_to_num(expected, nan=-1.0))
    # A wider window of the same column width reaches back before the rows began: they begin again.
    matrix, x0, dx = columns.matrix(buffers, names, 101.3 - 70, 101.3, 400, 0.1)
    expected = column_means(buffers[names[0]].column(0), buffers[names[0]].column(1), x0, dx, matrix.shape[1])
    assert dx == 0.2 and np.allclose(np.nan_to_num(matrix[0], nan=-1.0), np.nan_to_num(expected, nan=-1.0))
    # A cleared buffer (a new run on the device) starts its row again.
    first = buffers[names[0]]
    first.clear()
    first.append(5.0, 42.0)
    matrix, x0, dx = columns.matrix(buffers, names, 0.0, 10.0, 400, 0.1)
    assert np.nanmax(matrix[0]) == 42.0 and np.count_nonzero(np.isfinite(matrix[0])) == 1


def test_a_folded_nodes_busy_shading_counts_each_devices_overlaps_once():
    # Device 0 busy 0-1 s twice over (a backward and its all-reduce under it), device 1 busy 0.5-2 s.
    busy = busy_columns([0.0, 0.2, 0.5], [1.0, 0.8, 2.0], [0, 0, 1], 0.5, 4)
    assert busy.tolist() == pytest.approx([0.5, 1.0, 0.5, 0.5])


def kinds(device: str, step: float, idle: float, communication: float = 0.0, data: float = 0.0) -> DeviceKinds:
    by_kind = {"forward": step - idle - communication - data, "communication": communication, "data": data}
    return DeviceKinds(device, step, {k: v for k, v in by_kind.items() if v}, idle)


def test_the_outliers_are_the_devices_that_stand_out_and_the_straggler_is_the_one_that_waits_least():
    devices = [kinds(f"cuda:{d}", 1.0, 0.02, communication=0.3) for d in range(8)]
    devices[5] = kinds("cuda:5", 1.0, 0.02, communication=0.05)     # the others wait for it at each all-reduce
    devices[2] = kinds("cuda:2", 1.0, 0.02, communication=0.3, data=0.4)  # starved by its input pipeline
    memory = {d.device: 10e9 for d in devices} | {"cuda:7": 30e9}
    found = outliers(devices, memory)
    assert [(o.device, o.what) for o in found] == [("cuda:5", "straggler"), ("cuda:2", "data"), ("cuda:7", "memory")]
    assert found[0].share == pytest.approx(0.25)
    assert found[1].text == "cuda:2 waits on its input 40 % of each step (median device 0 %)"
    assert found[2].text == "cuda:7 holds 27.9 GiB, 3.0x the median device"
    # A straggler slowed by its input is named with it.
    starved = [kinds(f"cuda:{d}", 1.0, 0.02, communication=0.3) for d in range(4)]
    starved[1] = kinds("cuda:1", 1.0, 0.02, communication=0.05, data=0.25)
    assert straggler(starved).text.endswith("; it waits on its input 25 % of each step")
    # Alike devices: nothing stands out, and the list says what they share.
    same = [kinds(f"cuda:{d}", 1.0, 0.1, communication=0.3) for d in range(8)]
    assert outliers(same) == [] and straggler(same) is None
    assert alike(same) == "8 devices alike: idle 10 %, communication 30 %, data 0 % of each step (the median device)"


def test_the_time_by_kind_of_the_live_timelines_steps():
    steps = [(s, {"cuda:0": [["forward", s, s + 0.25], ["backward", s + 0.25, s + 1.0]],
                  "cuda:1": [["forward", s, s + 0.25], ["communication", s + 0.5, s + 0.75]]}) for s in range(3)]
    by_device = {d.device: d for d in step_kinds(steps)}
    assert by_device["cuda:0"].step_s == pytest.approx(1.0) and by_device["cuda:0"].idle_share == pytest.approx(0.0)
    assert by_device["cuda:1"].idle_share == pytest.approx(0.5)
    assert by_device["cuda:1"].share("communication") == pytest.approx(0.25)


def test_a_run_of_many_devices_exports_heatmaps_grouped_by_node_with_every_sample_in_the_table(tmp_path):
    names = [f"node{n}/cuda:{d}" for n in range(2) for d in range(HEATMAP_FROM)]
    samples = [Sample(t=k * 0.1, device=name, util=float(i), mem_used=float(2 ** 30 * (1 + i)), mem_total=2.0 ** 36)
               for k in range(50) for i, name in enumerate(names)]
    view = RunView(summary=RunSummary(devices=names), samples=samples)
    figures = {f.name: f for f in run_figures(view)}
    utilization, memory = figures["utilization"], figures["memory"]
    assert utilization.heat is not None and memory.heat is not None
    assert [(node, rows) for node, _, rows in utilization.heat.groups()] == [("node0", HEATMAP_FROM),
                                                                             ("node1", HEATMAP_FROM)]
    assert [s.name for s in utilization.series] == ["node0 mean", "node1 mean"]
    assert utilization.series[1].y[0] == pytest.approx(np.mean(range(HEATMAP_FROM, 2 * HEATMAP_FROM)))
    assert memory.heat.high == pytest.approx(19000)   # MiB: the most any device held (18,432), rounded up
    # The table keeps every sample of every device (the figure draws columns of them).
    assert len(utilization.rows) == 50 and len(utilization.columns) == 1 + 2 * len(names)
    assert csv_text(memory).count("\n") == 51
    svg = drawing.draw(utilization, "svg").decode()
    assert 'id="utilization/heat"' in svg and 'id="utilization/series/node1 mean"' in svg
    # Fewer devices keep their lines.
    few = run_figures(RunView(summary=RunSummary(devices=names[:2]), samples=[s for s in samples
                                                                              if s.device in names[:2]]))
    assert all(f.heat is None for f in few)
    assert heat_figure(UTILIZATION, {}).has_data is False


def many_devices_summary(nodes: int) -> RunSummary:
    names = [f"node{n}/cuda:{d}" for n in range(nodes) for d in range(8)]
    kinds_ = [kinds(name, 0.1, 0.07 if name == "node3/cuda:1" else 0.02, communication=0.03) for name in names]
    return RunSummary(run_id="r", strategy="ddp", model="mlp", devices=names, steps_measured=10, time_by_kind=kinds_,
                      devices_busy=[0.3 if name == "node3/cuda:1" else 0.8 for name in names])


def test_the_summary_of_256_devices_reads_node_by_node_and_names_the_device_that_stands_out():
    from engine.cli.report import summary_table
    text = summary_table(many_devices_summary(32))
    lines = text.splitlines()
    assert "devices          256 devices on 32 nodes: node0/cuda:0 .. node31/cuda:7" in lines
    assert len(lines) < 45 and max(len(line) for line in lines) < 120   # not 256 entries on a line
    assert "node     devices  busy               idle" in text      # no column without figures (util, memory)
    assert "node3          8  74% [30-80]        26% [20-70]" in text
    assert "look here first  node3/cuda:1 idles 70 % of each step (median device 20 %)" in text
    # Eight devices: a row per device, as before.
    few = dataclasses.replace(many_devices_summary(1), devices_busy=[0.8] * 8)
    assert "node0/cuda:7 80%" in summary_table(few) and "by node" not in summary_table(few)


def test_the_html_report_of_many_devices_keeps_its_table_by_node_in_lines():
    from engine.config import ExperimentConfig
    from engine.export.html_report import key_value_table, run_summary_rows
    from engine.store.database import RunRecord
    record = RunRecord("r", 0.0, 10.0, "finished", ExperimentConfig(strategy="ddp"), many_devices_summary(8), None,
                       None, None, None)
    rows = dict(run_summary_rows(record))
    assert rows["devices"] == "64 devices on 8 nodes: node0/cuda:0 .. node7/cuda:7"
    assert rows["by node"].count("\n") == 8 and rows["look here first"].startswith("node3/cuda:1 idles 70 %")
    assert '<td class="lines">node     devices' in key_value_table(rows.items())


def test_the_exported_timeline_of_many_devices_has_a_lane_per_node_and_keeps_every_interval_in_its_table():
    from engine.figures.timeline import timeline_figure
    names = [f"node{n}/cuda:{d}" for n in range(2) for d in range(8)]
    idle = "node1/cuda:3"
    rows = [(step, name, kind, step + t0, step + t1) for step in range(3) for name in names
            for kind, t0, t1 in ([("forward", 0.0, 0.1)] if name == idle else [("forward", 0.0, 0.5),
                                                                                ("backward", 0.5, 1.0)])]
    figure = timeline_figure(rows, names)
    assert figure.lanes.devices == ["node0", "node1"] and figure.lanes.intervals == []
    node0, node1 = figure.lanes.folded["node0"], figure.lanes.folded["node1"]
    assert min(node0) == pytest.approx(1.0) and node1[len(node1) // 2] == pytest.approx(7 / 8)
    assert "16 devices, a lane per node" in figure.title
    assert len(figure.rows) == len(rows)   # the table: every device's every interval
    svg = drawing.draw(figure, "svg").decode()
    assert 'id="timeline/folded/node1"' in svg and "timeline/interval/" not in svg


def test_devices_listed_rank_by_rank_are_grouped_node_by_node():
    from engine.devices import node_groups
    names = [f"node{r % 2}/cuda:{r // 2}" for r in range(2 * HEATMAP_FROM)]   # node0, node1, node0, ...
    assert [(node, len(devices)) for node, devices in node_groups(names)] == [("node0", HEATMAP_FROM),
                                                                              ("node1", HEATMAP_FROM)]
    figure = heat_figure(UTILIZATION, {name: ([0.0, 1.0], [10.0 * (r % 2)] * 2) for r, name in enumerate(names)})
    assert [s.name for s in figure.series] == ["node0 mean", "node1 mean"]
    assert figure.heat.devices[:HEATMAP_FROM] == names[0::2]
    assert figure.series[1].y[0] == pytest.approx(10.0)
