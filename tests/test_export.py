"""Exports of stored runs and experiments: SVG, CSV, PNG and HTML files, checked as a user would open them.

The store is filled directly (no training): a two-device pipeline run with
telemetry, steps and a timeline; an empty failed run; an experiment with a sweep.
"""
from __future__ import annotations

import csv
import math
import xml.etree.ElementTree as ET

import pytest

from no_qt import run_without_qt
from engine.export import ExportError, Mark, Series, bar_chart, experiment_figures, export, line_chart, run_figures
from engine.export.svg import ACCENT, nice_ticks
from engine.store import Store

SVG = "{http://www.w3.org/2000/svg}"
DEVICES = ["cpu:0", "cpu:1"]
STEPS = 8
CONFIG = {"strategy": "pipeline", "model": "mlp", "devices": "cpu:2", "width": 64, "depth": 4, "batch_size": 64,
          "steps": STEPS, "warmup": 2, "micro_batches": 4, "schedule": "gpipe", "seed": 0}


def step_event(step: int) -> dict:
    t = 1.0 + 0.1 * step
    return {"step": step, "t": t + 0.1, "time_s": 0.1, "samples": 64, "throughput": 640.0 + step,
            "loss": 2.3 - 0.01 * step, "batch_split": None,
            "intervals": {"cpu:0": [["forward", t, t + 0.03], ["backward", t + 0.06, t + 0.09]],
                          "cpu:1": [["wait", t, t + 0.03], ["forward", t + 0.03, t + 0.05],
                                    ["backward", t + 0.05, t + 0.06], ["optimizer", t + 0.06, t + 0.065]]}}


SAMPLE_TIMES = [0.1 * k for k in range(25)]


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.sqlite3") as s:
        yield s


@pytest.fixture
def run_id(store):
    run_id = store.create_run(CONFIG)
    store.add_steps(run_id, [step_event(k) for k in range(STEPS)])
    store.add_samples(run_id, [{"t": t, "device": d, "util": 50 + 40 * math.sin(t + i),
                                "mem_used": (800 + i) * 2 ** 20, "mem_total": 8 * 2 ** 30}
                               for t in SAMPLE_TIMES for i, d in enumerate(DEVICES)])
    store.finish_run(run_id, "finished", summary={
        "run_id": run_id, "status": "finished", "strategy": "pipeline", "model": "mlp", "devices": DEVICES,
        "split": [2], "micro_batches": 4, "schedule": "gpipe", "batch_size": 64, "steps": STEPS, "steps_measured": 6,
        "step_time_s": {"mean": 0.1, "std": 0.004}, "throughput": {"mean": 640.0, "std": 20.0},
        "loss": {"first": 2.3, "last": 2.23}, "param_norm": 9.5, "devices_busy": [0.6, 0.45],
        "bubble": {"measured": 0.475, "theory": 0.2}, "batch_split": None,
        "telemetry": {"rate_hz": 10, "util_mean": [55.0, 48.0], "samples": 50}})
    return run_id


def sweep_point(size: int, step_time: float) -> dict:
    return {"label": f"split size {size}", "strategy": "pipeline", "split": [2], "micro_batches": 64 // size,
            "x": size, "step_time_s": {"mean": step_time, "std": step_time * 0.05},
            "throughput": {"mean": 64 / step_time, "std": 1.0}, "bubble": {"measured": 0.3, "theory": 0.2},
            "run_ids": ["r1", "r2", "r3"]}


SWEEP = [(4, 0.30), (8, 0.21), (16, 0.18), (32, 0.24)]


@pytest.fixture
def experiment_id(store):
    exp_id = store.create_experiment("split-size", {"repeats": 3, "base": CONFIG})
    points = [sweep_point(s, t) for s, t in SWEEP]
    points[1].pop("throughput")  # a point missing a field is skipped, not fatal
    store.finish_experiment(exp_id, {"experiment_id": exp_id, "name": "split-size", "best": "split size 16",
                                     "points": points})
    return exp_id


def parse_svg(path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    assert root.get("viewBox") and root.get("width") and root.get("height")
    return root


def elements(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}{tag}") if e.get("class") == cls]


def read_csv(path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


# ---- run exports ---------------------------------------------------------------------------------
def test_svg_files_parse_and_hold_every_curve(store, run_id, tmp_path):
    paths = export(store, run_id, "svg", tmp_path / "out")
    names = {p.name.removeprefix(f"{run_id}-").removesuffix(".svg"): p for p in paths}
    assert {"utilization", "memory", "throughput", "step-time", "loss", "timeline", "busy"} <= set(names)

    util = parse_svg(names["utilization"])
    curves = elements(util, "polyline", "series")
    # The raw samples, faint, under each device's one-second mean; the legend names the means once.
    assert [c.get("data-name") for c in curves] == [f"{d} raw" for d in DEVICES] + DEVICES
    assert all(len(c.get("points").split()) == len(SAMPLE_TIMES) for c in curves)
    legend = [t.text for t in util.iter("{http://www.w3.org/2000/svg}text")
              if t.text in DEVICES or (t.text or "").endswith(" raw")]
    assert legend == DEVICES
    throughput = elements(parse_svg(names["throughput"]), "polyline", "series")
    assert [c.get("data-name") for c in throughput] == ["throughput"]

    bars = elements(parse_svg(names["busy"]), "rect", "bar")
    assert [b.get("data-name") for b in bars] == DEVICES

    intervals = elements(parse_svg(names["timeline"]), "rect", "interval")
    assert {i.get("data-device") for i in intervals} == set(DEVICES)
    assert {i.get("data-kind") for i in intervals} == {"forward", "backward", "optimizer"}  # wait is drawn as idle
    assert len(intervals) == 5 * 5  # the last 5 steps: 2 on cpu:0 and 3 (not counting the wait) on cpu:1


def test_timeline_title_gives_measured_and_theoretical_bubble(store, run_id):
    timeline = next(f for f in run_figures(store, run_id) if f.name == "timeline")
    assert "47.5%" in timeline.title and "20.0%" in timeline.title


def test_csv_has_units_in_the_header_and_every_row(store, run_id, tmp_path):
    paths = {p.name.removeprefix(f"{run_id}-"): p for p in export(store, run_id, "csv", tmp_path / "csv")}
    util = read_csv(paths["utilization.csv"])
    assert util[0] == ["t (s)", "util cpu:0 (%)", "util cpu:1 (%)", "util cpu:0 1-s mean (%)",
                       "util cpu:1 1-s mean (%)"]
    assert len(util) - 1 == len(SAMPLE_TIMES)
    assert util[1][3] == util[1][1]  # the first sample's mean is itself
    memory = read_csv(paths["memory.csv"])
    assert memory[0] == ["t (s)", "mem cpu:0 (MiB)", "mem cpu:1 (MiB)"] and memory[1][1:] == ["800.0", "801.0"]
    throughput = read_csv(paths["throughput.csv"])
    assert throughput[0] == ["step", "throughput (samples/s)"] and len(throughput) - 1 == STEPS
    timeline = read_csv(paths["timeline.csv"])
    assert timeline[0] == ["step", "device", "kind", "t0 (s)", "t1 (s)"]
    assert len(timeline) - 1 == 5 * 6 and {r[0] for r in timeline[1:]} == {"3", "4", "5", "6", "7"}
    busy = read_csv(paths["busy.csv"])
    assert busy == [["device", "busy (%)", "idle (%)"], ["cpu:0", "60.0", "40.0"], ["cpu:1", "45.0", "55.0"]]


def test_png_decodes_at_twice_the_svg_size(store, run_id, tmp_path, qapp):
    # qapp: the process's one Qt application is pytest-qt's QApplication, which the app tests
    # need too; left to itself, the export would make a QGuiApplication that they cannot use.
    pytest.importorskip("PySide6.QtSvg", reason="PNG export needs PySide6")
    from PySide6 import QtGui
    paths = export(store, run_id, "png", tmp_path / "png")
    assert len(paths) == len(run_figures(store, run_id))
    for path in paths:
        image = QtGui.QImage(str(path))
        assert not image.isNull(), path
        assert image.width() == 1600 and image.height() > 0
    # not a blank page: the plot's colours are there
    image = QtGui.QImage(str(paths[0]))
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 10


def test_html_report_embeds_every_figure_config_and_environment(store, run_id, tmp_path):
    from importlib.metadata import version
    [path] = export(store, run_id, "html", tmp_path / "report" / "run.html")
    html = path.read_text()
    assert html.count("<svg") == len(run_figures(store, run_id))
    assert "Configuration" in html and "micro_batches" in html and "gpipe" in html
    assert "Summary" in html and "47.5%" in html and "100 ± 4 ms" in html
    assert "Environment" in html and version("torch") in html and "CPU cores" in html and "NVIDIA driver" in html
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_html_into_a_folder_is_named_after_the_id(store, run_id, tmp_path):
    [path] = export(store, run_id, "html", tmp_path)
    assert path == tmp_path / f"{run_id}.html"


def test_existing_files_are_kept_unless_forced(store, run_id, tmp_path):
    export(store, run_id, "svg", tmp_path / "out")
    marker = tmp_path / "out" / f"{run_id}-loss.svg"
    marker.write_text("mine")
    with pytest.raises(ExportError, match="already exists.*; pass --force to overwrite") as err:
        export(store, run_id, "svg", tmp_path / "out")
    assert f"{tmp_path / 'out' / run_id}-" in str(err.value)
    assert marker.read_text() == "mine"
    report = tmp_path / "r.html"
    report.write_text("mine")
    with pytest.raises(ExportError, match="r.html already exists; pass --force"):
        export(store, run_id, "html", report)
    export(store, run_id, "svg", tmp_path / "out", force=True)
    export(store, run_id, "html", report, force=True)
    assert marker.read_text().startswith("<svg") and report.read_text().startswith("<!DOCTYPE html>")


def test_unknown_id_and_format_are_refused(store, run_id, tmp_path):
    with pytest.raises(ExportError, match="no run or experiment with id 'nope'"):
        export(store, "nope", "svg", tmp_path)
    with pytest.raises(ExportError, match="no run or experiment with id 'exp-missing'"):
        export(store, "exp-missing", "csv", tmp_path)
    with pytest.raises(ExportError, match="png, svg, csv, html"):
        export(store, run_id, "gif", tmp_path)
    assert isinstance(ExportError("x"), ValueError)


def test_a_run_with_no_steps_or_samples_still_exports(store, tmp_path):
    run_id = store.create_run(CONFIG)
    store.finish_run(run_id, "failed", error="Traceback ...\nRuntimeError: boom")
    svgs = export(store, run_id, "svg", tmp_path / "svg")
    assert svgs and all("no data" in p.read_text() for p in svgs)
    for p in svgs:
        parse_svg(p)
    csvs = export(store, run_id, "csv", tmp_path / "csv")
    assert all(len(read_csv(p)) == 1 for p in csvs)  # the header alone
    [html] = export(store, run_id, "html", tmp_path / "run.html")
    text = html.read_text()
    assert text.count("<svg") == len(svgs) and "RuntimeError: boom" in text


# ---- experiment exports -----------------------------------------------------------------------------
def test_experiment_bars_and_sweep_mark_the_best(store, experiment_id, tmp_path):
    paths = {p.name.removeprefix(f"{experiment_id}-"): p for p in export(store, experiment_id, "svg", tmp_path)}
    assert {"step-time.svg", "throughput.svg", "sweep.svg"} <= set(paths)

    bars = elements(parse_svg(paths["step-time.svg"]), "rect", "bar")
    assert [b.get("data-name") for b in bars] == [f"split size {s}" for s, _ in SWEEP]
    assert [b.get("fill") == ACCENT for b in bars] == [False, False, True, False]
    # the point without throughput has no bar there, and nothing broke
    assert len(elements(parse_svg(paths["throughput.svg"]), "rect", "bar")) == len(SWEEP) - 1

    sweep = parse_svg(paths["sweep.svg"])
    [curve] = elements(sweep, "polyline", "series")
    assert curve.get("data-name") == "pipeline" and len(curve.get("points").split()) == len(SWEEP)
    assert [m.get("data-name") for m in elements(sweep, "g", "mark")] == ["best"]


def test_experiment_csv_and_html(store, experiment_id, tmp_path):
    paths = {p.name.removeprefix(f"{experiment_id}-"): p for p in export(store, experiment_id, "csv", tmp_path)}
    rows = read_csv(paths["step-time.csv"])
    assert rows[0] == ["label", "strategy", "split", "micro-batches", "step time mean (s)", "step time std (s)", "runs"]
    assert len(rows) - 1 == len(SWEEP) and rows[3][0] == "split size 16" and rows[3][-1] == "3"
    sweep = read_csv(paths["sweep.csv"])
    assert sweep[0][2] == "split size (samples per micro-batch)" and [r[2] for r in sweep[1:]] == ["4", "8", "16", "32"]
    [html] = export(store, experiment_id, "html", tmp_path / "exp.html")
    text = html.read_text()
    assert text.count("<svg") == len(experiment_figures(store, experiment_id))
    assert "split size 16 (best)" in text and "repeats per point" in text and "Environment" in text


def test_an_unfinished_experiment_is_rebuilt_from_its_runs(store, tmp_path):
    exp_id = store.create_experiment("compare-strategies", {"repeats": 2})
    for label, step_time in [("single", 0.2), ("single", 0.22), ("pipeline", 0.15), ("ddp", 0.1)]:
        rid = store.create_run(CONFIG, experiment_id=exp_id, label=label)
        summary = {"run_id": rid, "strategy": label, "devices": ["cpu:0", "cpu:1"],
                   "step_time_s": {"mean": step_time, "std": 0.0}, "throughput": {"mean": 64 / step_time, "std": 0.0},
                   "bubble": {"measured": 0.5, "theory": None}, "devices_busy": [0.5, 0.5]}
        if label == "ddp":
            del summary["bubble"]  # a run another version stored: its point says so, the others still show
        store.finish_run(rid, "finished", summary=summary)
    bars = elements(parse_svg(export(store, exp_id, "svg", tmp_path)[0]), "rect", "bar")
    assert [b.get("data-name") for b in bars] == ["single", "pipeline"]
    assert [b.get("fill") == ACCENT for b in bars] == [False, True]
    from engine.experiments import stored_result
    points = {p["label"]: p for p in stored_result(store, store.get_experiment(exp_id))["points"]}
    assert points["single"]["step_time_s"]["mean"] == pytest.approx(0.21) and len(points["single"]["run_ids"]) == 2
    assert "could not be rebuilt from its runs: KeyError" in points["ddp"]["error"]


# ---- the charts themselves -------------------------------------------------------------------------------
def test_charts_skip_missing_values_and_survive_a_single_point():
    svg = line_chart([Series("a", [0, 1, 2, 3], [1.0, None, float("nan"), 4.0], yerr=[0.1, None, 0.2, float("inf")]),
                      Series("b", [5], [2.0])], title="t", xlabel="x (s)", ylabel="y (%)",
                     marks=[Mark(3, "best", 4.0)])
    root = ET.fromstring(svg)
    curves = {c.get("data-name"): c.get("points").split() for c in elements(root, "polyline", "series")}
    assert len(curves["a"]) == 2 and len(curves["b"]) == 1
    assert "nan" not in svg and "inf" not in svg
    assert len(elements(root, "circle", "point")) == 3  # a single point still shows as a dot
    assert "no data" in line_chart([Series("a", [1], [None])], title="t", xlabel="x", ylabel="y")
    assert "no data" in bar_chart(["a"], [None], title="t", ylabel="y")


def test_bars_mark_the_best_and_draw_error_bars():
    root = ET.fromstring(bar_chart(["a", "b & c"], [2.0, 1.0], [0.5, 0.1], title="<t>", ylabel="time (ms)",
                                   highlight=1))
    bars = elements(root, "rect", "bar")
    assert [b.get("data-name") for b in bars] == ["a", "b & c"]  # escaped in the file, intact when parsed
    assert bars[1].get("fill") == ACCENT and bars[0].get("fill") != ACCENT
    assert [t.text for t in elements(root, "text", "best")] == ["best"]
    assert root.find(f"{SVG}title").text == "<t>"


def test_ticks_are_round_numbers():
    assert nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(0.0031, 0.0072)[0] <= 0.0031 and nice_ticks(0.0031, 0.0072)[-1] >= 0.0072
    assert nice_ticks(0, 7, 8, integer=True) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert nice_ticks(0, 2, integer=True) == [0, 1, 2]  # steps never split into fractions
    assert nice_ticks(5, 5)[0] < 5 < nice_ticks(5, 5)[-1]


# ---- without Qt ---------------------------------------------------------------------------------------
def test_svg_csv_html_work_without_qt_and_png_says_what_it_needs(run_id, store, tmp_path):
    proc = run_without_qt(f"""
        from engine.store import Store
        from engine.export import export, ExportError
        store = Store({str(store.path)!r})
        for fmt, out in [('svg', 'svg'), ('csv', 'csv'), ('html', 'r.html')]:
            export(store, {run_id!r}, fmt, {str(tmp_path)!r} + '/' + out)
        try:
            export(store, {run_id!r}, 'png', {str(tmp_path)!r} + '/png')
        except ExportError as exc:
            print('PNG:', exc)
        assert 'torch' not in sys.modules, 'export imported torch'
    """, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "PNG: PNG export needs PySide6" in proc.stdout and "svg, csv and html export work without it" in proc.stdout
    assert (tmp_path / "r.html").exists() and len(list((tmp_path / "svg").glob("*.svg"))) >= 7
