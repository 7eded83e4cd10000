"""A stored run exported from the command line and shown in the app's history carry the same figures.

Both draw engine.figures' definitions: the CLI with matplotlib, the history view
(PlotPanel.show_runs, loaded by history_panel.load_runs) with pyqtgraph. The
series' names, their points, the titles and the axes' labels must agree.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from drawn_svg import drawn, points, texts
from engine.cli import main
from engine.results import RunSummary, Step, from_json
from engine.store import Store

DEVICES = ["cpu:0", "cpu:1"]


def store_a_run(db) -> str:
    """Steps with a warm-up, telemetry with a device that missed a sample, and the intervals of each step."""
    with Store(db) as store:
        run_id = store.create_run({"strategy": "model-parallel", "model": "mlp", "devices": "cpu:2", "split": [2],
                                   "steps": 12, "warmup": 2})
        store.add_steps(run_id, [
            Step(step=s, t=0.1 * (s + 1), time_s=0.1, samples=32, throughput=320.0 + s,
                 loss=2.3 - 0.1 * s, busy={"cpu:0": 0.5, "cpu:1": 0.4},
                 intervals={"cpu:0": [["forward", 0.1 * s, 0.1 * s + 0.04]],
                            "cpu:1": [["backward", 0.1 * s + 0.04, 0.1 * s + 0.08]]}) for s in range(12)])
        store.add_samples(run_id, [{"t": k * 0.1, "device": d, "util": 30.0 + 5 * k + i, "mem_used": (k + 1) * 2 ** 20}
                                   for k in range(15) for i, d in enumerate(DEVICES) if (k, d) != (7, "cpu:1")])
        store.finish_run(run_id, "finished", from_json(RunSummary, {
            "devices": DEVICES, "split": [2], "step_time_s": {"mean": 0.1, "std": 0.01},
            "throughput": {"mean": 325.0, "std": 1.0}, "bubble": {"measured": 0.55, "theory": 0.5},
            "devices_busy": [0.5, 0.4], "loss": {"first": 2.3, "last": 1.2}}))
    return run_id


def test_the_cli_export_and_the_history_view_draw_the_same_series(qtbot, qapp_configured, tmp_path):
    from app.state.live_data import TelemetryHistory
    from app.views.history_panel import load_runs
    from app.views.plots.panel import PlotPanel
    db = tmp_path / "history.sqlite3"
    run_id = store_a_run(db)
    out = tmp_path / "svg"
    assert main(["export", run_id, "--format", "svg", "--out", str(out), "--db", str(db)]) == 0

    panel = PlotPanel(TelemetryHistory(10.0))
    qtbot.addWidget(panel)
    panel.show_runs(load_runs(str(db), [run_id]))

    for name, plot in (("utilization", panel.series_plots["utilization"]), ("memory", panel.series_plots["memory"]),
                       ("throughput", panel.series_plots["throughput"]), ("loss", panel.series_plots["loss"])):
        exported = ET.parse(out / f"{run_id}-{name}.svg").getroot()
        in_file = {series: points(curve) for series, curve in drawn(exported, "series").items()}
        on_screen = {key: len(plot.series_data(key)[0]) for key in plot.series_keys()}
        assert on_screen == in_file and in_file, name
        assert plot.legend_names() == [s for s in in_file if not s.endswith(" raw")], name
        left, bottom = (plot.getPlotItem().getAxis(side).labelText for side in ("left", "bottom"))
        assert {left, bottom, plot.figure.title} <= set(texts(exported)), name
        assert list(drawn(exported, "mark")) == [m.label for m in plot.figure.marks], name
    # The device that missed a sample has one point less, in both; the warm-up's end is marked in both.
    utilization = panel.series_plots["utilization"]
    assert len(utilization.series_data("cpu:1")[0]) == 14 and len(utilization.series_data("cpu:0")[0]) == 15
    assert [m.label for m in panel.series_plots["throughput"].figure.marks] == ["warm-up ends"]
