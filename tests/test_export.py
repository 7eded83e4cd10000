"""Exports of stored runs and experiments: SVG, PNG, PDF, CSV and HTML files, checked as a user would open them.

The store is filled directly (no training): a two-device pipeline run with
telemetry, steps and a timeline; an empty failed run; an experiment with a sweep.
The figures are engine.figures' definitions, drawn by matplotlib (engine/export/
drawing.py), which gives each drawn element an id: ``<figure>/series/<name>``,
``/bar/<label>``, ``/mark/<label>``, ``/interval/<device>/<kind>``.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from drawn_svg import SVG, drawn, fill, points
from engine.export import ExportError, experiment_figures, export, run_figures
from engine.figures import Axis, Bars, Figure, Mark, Series, palette
from engine.results import ExperimentPlan, ExperimentResult, RunSummary, Step, from_json
from engine.store import Store
from no_qt import QT, run_without, run_without_qt
from procs import ROOT

MATPLOTLIB_MISSING = "png, svg, pdf and html export draw with matplotlib, which is not installed here"
DEVICES = ["cpu:0", "cpu:1"]
STEPS = 8
CONFIG = {"strategy": "pipeline", "model": "mlp", "devices": "cpu:2", "width": 64, "depth": 4, "batch_size": 64,
          "steps": STEPS, "warmup": 2, "micro_batches": 4, "schedule": "gpipe", "seed": 0}


def step_event(step: int) -> Step:
    t = 1.0 + 0.1 * step
    return Step(step=step, t=t + 0.1, time_s=0.1, samples=64, throughput=640.0 + step, loss=2.3 - 0.01 * step,
                intervals={"cpu:0": [["forward", t, t + 0.03], ["backward", t + 0.06, t + 0.09]],
                           "cpu:1": [["wait", t, t + 0.03], ["forward", t + 0.03, t + 0.05],
                                     ["backward", t + 0.05, t + 0.06], ["optimizer", t + 0.06, t + 0.065]]})


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
    store.finish_run(run_id, "finished", summary=from_json(RunSummary, {
        "run_id": run_id, "status": "finished", "strategy": "pipeline", "model": "mlp", "devices": DEVICES,
        "split": [2], "micro_batches": 4, "schedule": "gpipe", "batch_size": 64, "steps": STEPS, "steps_measured": 6,
        "step_time_s": {"mean": 0.1, "std": 0.004}, "throughput": {"mean": 640.0, "std": 20.0},
        "loss": {"first": 2.3, "last": 2.23}, "param_norm": 9.5, "devices_busy": [0.6, 0.45],
        "bubble": {"measured": 0.475, "theory": 0.2}, "batch_split": None,
        "telemetry": {"rate_hz": 10, "util_mean": [55.0, 48.0], "samples": 50},
        "efficiency": {"samples_per_step": 64, "devices": [
            {"device": d, "flops_per_step": flops, "step_s": 0.1, "busy_s": busy,
             "measured_peak": {"flops_per_s": 1e10, "source": "measured: test"}}
            for d, flops, busy in (("cpu:0", 4e8, 0.06), ("cpu:1", 2e8, 0.045))]}}))
    return run_id


def sweep_point(size: int, step_time: float) -> dict:
    return {"label": f"split size {size}", "strategy": "pipeline", "split": [2], "micro_batches": 64 // size,
            "x": size, "step_time_s": {"mean": step_time, "std": step_time * 0.05},
            "throughput": {"mean": 64 / step_time, "std": 1.0}, "bubble": {"measured": 0.3, "theory": 0.2},
            "run_ids": ["r1", "r2", "r3"]}


SWEEP = [(4, 0.30), (8, 0.21), (16, 0.18), (32, 0.24)]


@pytest.fixture
def experiment_id(store):
    exp_id = store.create_experiment("split-size", ExperimentPlan(repeats=3, base=CONFIG))
    points = [sweep_point(s, t) for s, t in SWEEP]
    points[1].pop("throughput")  # a point missing a field is skipped, not fatal
    store.finish_experiment(exp_id, from_json(ExperimentResult, {"experiment_id": exp_id, "name": "split-size",
                                                                 "best": "split size 16", "points": points}))
    return exp_id


def parse_svg(path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    assert root.get("viewBox") and root.get("width") and root.get("height")
    return root


def read_csv(path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


# ---- run exports ---------------------------------------------------------------------------------
def test_svg_files_parse_and_hold_every_curve(store, run_id, tmp_path):
    paths = export(store, run_id, "svg", tmp_path / "out")
    names = {p.name.removeprefix(f"{run_id}-").removesuffix(".svg"): p for p in paths}
    assert {"utilization", "memory", "throughput", "step-time", "loss", "timeline", "busy"} <= set(names)

    util = parse_svg(names["utilization"])
    curves = drawn(util, "series")
    # The raw samples, faint, under each device's one-second mean; the legend names the means once.
    assert list(curves) == [f"{d} raw" for d in DEVICES] + DEVICES
    assert all(points(c) == len(SAMPLE_TIMES) for c in curves.values())
    legend = [t.text for t in util.iter(f"{SVG}text") if t.text in DEVICES or (t.text or "").endswith(" raw")]
    assert legend == DEVICES
    throughput = parse_svg(names["throughput"])
    assert list(drawn(throughput, "series")) == ["throughput"]
    assert list(drawn(throughput, "mark")) == ["warm-up ends"]  # CONFIG's warm-up of 2 steps

    assert list(drawn(parse_svg(names["busy"]), "bar")) == DEVICES
    # Each device's MFU per step: its counted FLOPs over each step's 0.1 s and its peak (40 % and 20 %).
    efficiency = drawn(parse_svg(names["efficiency"]), "series")
    assert list(efficiency) == DEVICES and all(points(c) == STEPS for c in efficiency.values())

    intervals = drawn(parse_svg(names["timeline"]), "interval")
    assert {key.split("/")[0] for key in intervals} == set(DEVICES)
    assert {key.split("/")[1] for key in intervals} == {"forward", "backward", "optimizer", "wait"}
    # the last 3 steps (as the app shows): 2 intervals on cpu:0, 4 on cpu:1 (the wait a thin band, as in the app)
    assert sum(len(list(g.iter(f"{SVG}path"))) for g in intervals.values()) == 3 * 6


def test_timeline_title_gives_measured_and_theoretical_bubble(store, run_id):
    timeline = next(f for f in run_figures(store, run_id) if f.name == "timeline")
    assert "47.5%" in timeline.title and "20.0%" in timeline.title


def test_csv_has_units_in_the_header_and_every_row(store, run_id, tmp_path):
    paths = {p.name.removeprefix(f"{run_id}-"): p for p in export(store, run_id, "csv", tmp_path / "csv")}
    util = read_csv(paths["utilization.csv"])
    assert util[0] == ["t (ms)", "util cpu:0 (%)", "util cpu:1 (%)", "util cpu:0 1-s mean (%)",
                       "util cpu:1 1-s mean (%)"]
    assert len(util) - 1 == len(SAMPLE_TIMES)
    assert util[1][3] == util[1][1]  # the first sample's mean is itself
    memory = read_csv(paths["memory.csv"])
    assert memory[0] == ["t (ms)", "mem cpu:0 (MiB)", "mem cpu:1 (MiB)"] and memory[1][1:] == ["800", "801"]
    # times in ms throughout, to a microsecond, trailing zeros dropped (engine.figures.numbers.table_value)
    assert [float(r[0]) for r in util[1:]] == [round(t * 1000, 3) for t in SAMPLE_TIMES]
    throughput = read_csv(paths["throughput.csv"])
    assert throughput[0] == ["step", "throughput (samples/s)"] and len(throughput) - 1 == STEPS
    timeline = read_csv(paths["timeline.csv"])
    assert timeline[0] == ["step", "device", "kind", "t0 (ms)", "t1 (ms)"]
    assert min(float(r[3]) for r in timeline[1:]) >= 1000   # on the run's clock, as "t (ms)": step 5 of 8 at ~1 s
    assert len(timeline) - 1 == 3 * 6 and {r[0] for r in timeline[1:]} == {"5", "6", "7"}  # the last 3, as on screen
    busy = read_csv(paths["busy.csv"])
    assert busy == [["device", "busy (%)", "idle (%)"], ["cpu:0", "60", "40"], ["cpu:1", "45", "55"]]
    mfu = read_csv(paths["efficiency.csv"])
    assert mfu[0] == ["step", "MFU cpu:0 (%)", "MFU cpu:1 (%)"] and mfu[1] == ["0", "40", "20"]


def test_png_is_1600_pixels_wide_and_not_blank(store, run_id, tmp_path):
    paths = export(store, run_id, "png", tmp_path / "png")
    assert len(paths) == len(run_figures(store, run_id))
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", path
        width, height = struct.unpack(">II", data[16:24])
        assert width == 1600 and height > 300, (path, width, height)
    # not a blank page: the curves' colours are there (a PNG of one colour compresses to almost nothing)
    assert paths[0].stat().st_size > 20_000


def test_pdf_holds_one_page_per_figure_with_its_text(store, run_id, experiment_id, tmp_path):
    for item, figures in ((run_id, run_figures(store, run_id)),
                          (experiment_id, experiment_figures(store, experiment_id))):
        paths = export(store, item, "pdf", tmp_path / item)
        assert [p.name for p in paths] == [f"{item}-{f.name}.pdf" for f in figures]
        for path in paths:
            data = path.read_bytes()
            assert data.startswith(b"%PDF-") and b"/Type /Pages /Kids [" in data and b"/Count 1 " in data
            assert data.count(b"/Type /Page ") == 1


def test_html_report_embeds_every_figure_config_and_environment(store, run_id, tmp_path):
    from importlib.metadata import version
    [path] = export(store, run_id, "html", tmp_path / "report" / "run.html")
    html = path.read_text()
    figures = run_figures(store, run_id)
    assert html.count("<svg") == len(figures)
    assert all(f'id="{f.name}/' in html for f in figures if f.has_data)  # matplotlib's SVG of each, inline
    assert "Configuration" in html and "micro_batches" in html and "gpipe" in html
    assert "Summary" in html and "47.5%" in html and "100 ± 4 ms" in html
    assert "cpu:0 400 MFLOP a step, 4 GFLOP/s" in html and "MFU 40.0% of 10 GFLOP/s (measured: test)" in html
    assert "Environment" in html and version("torch") in html and "CPU cores" in html and "NVIDIA driver" in html
    # nothing fetched from anywhere: the only addresses are the SVG's XML namespaces
    namespaces = ('xmlns="http://www.w3.org/2000/svg"', 'xmlns:xlink="http://www.w3.org/1999/xlink"')
    assert "<script" not in html and "http" not in re.sub("|".join(map(re.escape, namespaces)), "", html)
    assert "<?xml" not in html and "<!DOCTYPE svg" not in html


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
    assert "<svg" in marker.read_text() and report.read_text().startswith("<!DOCTYPE html>")


def test_unknown_id_and_format_are_refused(store, run_id, tmp_path):
    with pytest.raises(ExportError, match="no run or experiment with id 'nope'"):
        export(store, "nope", "svg", tmp_path)
    with pytest.raises(ExportError, match="no run or experiment with id 'exp-missing'"):
        export(store, "exp-missing", "csv", tmp_path)
    with pytest.raises(ExportError, match="png, svg, pdf, csv, html"):
        export(store, run_id, "gif", tmp_path)
    assert isinstance(ExportError("x"), ValueError)


def test_a_run_with_no_steps_or_samples_still_exports(store, tmp_path):
    run_id = store.create_run(CONFIG)
    store.finish_run(run_id, "failed", error="Traceback ...\nRuntimeError: boom")
    svgs = export(store, run_id, "svg", tmp_path / "svg")
    assert svgs and all("no data" in p.read_text() for p in svgs)  # a frame that says so, never a hole
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

    bars = drawn(parse_svg(paths["step-time.svg"]), "bar")
    assert list(bars) == [f"split size {s}" for s, _ in SWEEP]
    assert [fill(b) == palette.BEST for b in bars.values()] == [False, False, True, False]
    # the point without throughput has no bar there, and nothing broke
    assert list(drawn(parse_svg(paths["throughput.svg"]), "bar")) == ["split size 4", "split size 16", "split size 32"]

    sweep = parse_svg(paths["sweep.svg"])
    curves = drawn(sweep, "series")
    assert list(curves) == ["pipeline"] and points(curves["pipeline"]) == len(SWEEP)
    assert list(drawn(sweep, "mark")) == ["best: split size 16"]
    assert "split size (samples per micro-batch)" in [t.text for t in sweep.iter(f"{SVG}text")]


def test_experiment_csv_and_html(store, experiment_id, tmp_path):
    paths = {p.name.removeprefix(f"{experiment_id}-"): p for p in export(store, experiment_id, "csv", tmp_path)}
    rows = read_csv(paths["step-time.csv"])
    assert rows[0] == ["label", "strategy", "split", "micro-batches", "step time mean (ms)", "step time std (ms)",
                       "step time min (ms)", "step time max (ms)", "runs", "standing", "disturbed"]
    assert len(rows) - 1 == len(SWEEP) and rows[3][0] == "split size 16" and rows[3][-3:] == ["3", "best", ""]
    sweep = read_csv(paths["sweep.csv"])
    assert sweep[0][2] == "split size (samples per micro-batch)" and [r[2] for r in sweep[1:]] == ["4", "8", "16", "32"]
    [html] = export(store, experiment_id, "html", tmp_path / "exp.html")
    text = html.read_text()
    assert text.count("<svg") == len(experiment_figures(store, experiment_id))
    assert "split size 16 (best)" in text and "repeats per point" in text and "Environment" in text


def test_exports_mark_ties_and_disturbed_points(store, tmp_path):
    """Two points within each other's spread are tied (no best), and a point with a disturbed run says so: the
    CSV in a column each, the HTML report per row and in a line under the table."""
    exp_id = store.create_experiment("split-size", ExperimentPlan(repeats=3, base=CONFIG))
    points = [sweep_point(s, t) for s, t in ((8, 0.20), (16, 0.19), (32, 0.30))]
    points[0]["disturbed"] = "other programs took 35% of cpu:1 during this run"
    store.finish_experiment(exp_id, from_json(ExperimentResult, {
        "experiment_id": exp_id, "name": "split-size", "best": "split size 16", "tied": ["split size 8"],
        "points": points}))
    paths = {p.name.removeprefix(f"{exp_id}-"): p for p in export(store, exp_id, "csv", tmp_path / "csv")}
    for name in ("step-time.csv", "throughput.csv"):
        rows = read_csv(paths[name])
        standing, disturbed = rows[0].index("standing"), rows[0].index("disturbed")
        assert [r[standing] for r in rows[1:]] == ["tied", "tied", ""]
        assert [bool(r[disturbed]) for r in rows[1:]] == [True, False, False]
    [html] = export(store, exp_id, "html", tmp_path / "exp.html")
    text = html.read_text()
    assert "split size 8 (tied)" in text and "split size 16 (tied)" in text and "(best)" not in text
    assert "tied: split size 16, split size 8 (within their spread)" in text
    assert "1 of 3 points disturbed (split size 8)" in text


def test_an_unfinished_experiment_is_rebuilt_from_its_runs(store, tmp_path):
    exp_id = store.create_experiment("compare-strategies", ExperimentPlan(repeats=2))
    for label, step_time in [("single", 0.2), ("single", 0.22), ("pipeline", 0.15), ("ddp", 0.1)]:
        rid = store.create_run(CONFIG, experiment_id=exp_id, label=label)
        summary = {"run_id": rid, "strategy": label, "devices": ["cpu:0", "cpu:1"],
                   "step_time_s": {"mean": step_time, "std": 0.0}, "throughput": {"mean": 64 / step_time, "std": 0.0},
                   "bubble": {"measured": 0.5, "theory": None}, "devices_busy": [0.5, 0.5]}
        if label == "ddp":
            del summary["step_time_s"]  # a run that measured nothing: its point says so, the others still show
        store.finish_run(rid, "finished", summary=from_json(RunSummary, summary))
    step_time = experiment_figures(store, exp_id)[0]
    assert step_time.name == "step-time" and step_time.bars.labels == ["single", "pipeline", "ddp"]
    assert "· Compare strategies" in step_time.title   # the exported figures name the preset for people
    bars = drawn(parse_svg(export(store, exp_id, "svg", tmp_path)[0]), "bar")
    assert list(bars) == ["single", "pipeline"]  # ddp's point has nothing to draw: no bar
    assert [fill(b) == palette.BEST for b in bars.values()] == [False, True]
    from engine.experiments import stored_result
    points = {p.label: p for p in stored_result(store, store.get_experiment(exp_id)).points}
    assert points["single"].step_time_s.mean == pytest.approx(0.21) and len(points["single"].run_ids) == 2
    assert points["ddp"].error == "its runs have no measured step" and points["ddp"].step_time_s is None


# ---- the drawing itself -------------------------------------------------------------------------------
def draw_svg(figure: Figure) -> ET.Element:
    from engine.export import drawing
    return ET.fromstring(drawing.draw(figure, "svg"))


def test_drawing_skips_missing_values_and_survives_a_single_point():
    figure = Figure("f", "t", Axis("x", "s"), Axis("y", "%"), marks=[Mark(3, "best", 4.0)], series=[
        Series("a", [0, 1, 2, 3], [1.0, None, float("nan"), 4.0], palette.series_color(0),
               yerr=[0.1, None, 0.2, float("inf")]),
        Series("b", [5], [2.0], palette.series_color(1))])
    root = draw_svg(figure)
    curves = drawn(root, "series")
    assert points(curves["a"]) == 2 and points(curves["b"]) == 1
    assert len(list(curves["b"].iter(f"{SVG}use"))) == 1  # a single point still shows as a dot
    assert "nan" not in ET.tostring(root, encoding="unicode")
    empty = Figure("e", "t", Axis("x"), Axis("y"), series=[Series("a", [1], [None], "#000000")])
    assert "no data" in [t.text for t in draw_svg(empty).iter(f"{SVG}text")]
    no_bars = Figure("e", "t", Axis("x"), Axis("y"), bars=Bars(["a"], [None]))
    assert "no data" in [t.text for t in draw_svg(no_bars).iter(f"{SVG}text")]


def test_bars_mark_the_best_and_draw_error_bars():
    root = draw_svg(Figure("f", "<t>", Axis("point"), Axis("time", "ms"),
                           bars=Bars(["a", "b & c"], [2.0, 1.0], [0.5, 0.1], best=1)))
    bars = drawn(root, "bar")
    assert list(bars) == ["a", "b & c"]  # escaped in the file, intact when parsed
    assert fill(bars["b & c"]) == palette.BEST and fill(bars["a"]) != palette.BEST
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts.count("best") == 2 and texts.index("best") == texts.index("1") - 1  # over its bar, and in the legend
    assert list(drawn(root, "errors")) == ["a", "b & c"]  # ± std on each bar
    assert root.find(f"{SVG}title").text == "<t>"


def test_a_long_curve_is_drawn_from_its_peaks():
    from engine.export import drawing
    rng = [((k * 7919) % 1000) / 10 for k in range(100_000)]
    rng[54_321] = 500.0     # one spike among 100,000 points must survive the thinning
    kept = drawing._peaks(drawing._floats(rng), drawing.MAX_POINTS)
    assert len(kept) <= drawing.MAX_POINTS + 1 and 54_321 in kept and kept[-1] == 99_999
    figure = Figure("long", "t", Axis("step"), Axis("y"), series=[Series("y", list(range(100_000)), rng, "#4e9af1")])
    assert points(drawn(draw_svg(figure), "series")["y"]) < drawing.MAX_POINTS * 1.01  # not 100,000


# ---- without Qt, without matplotlib, without a display --------------------------------------------------
def test_every_format_works_without_qt(run_id, store, tmp_path):
    proc = run_without_qt(f"""
        from engine.store import Store
        from engine.export import export
        store = Store({str(store.path)!r})
        for fmt, out in [('png', 'png'), ('svg', 'svg'), ('pdf', 'pdf'), ('csv', 'csv'), ('html', 'r.html')]:
            export(store, {run_id!r}, fmt, {str(tmp_path)!r} + '/' + out)
        assert 'torch' not in sys.modules, 'export imported torch'
        assert not [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph')], 'export imported Qt'
    """, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.html").exists() and len(list((tmp_path / "pdf").glob("*.pdf"))) >= 7


def test_without_matplotlib_drawn_formats_say_what_they_need_and_create_nothing(run_id, store, tmp_path):
    """The GPU machines have neither Qt nor matplotlib: csv works, the others refuse before making a folder."""
    out = tmp_path / "out"
    proc = run_without(QT + ("matplotlib",), f"""
        from engine.store import Store
        from engine.export import ExportError, export
        from engine.cli import main
        store = Store({str(store.path)!r})
        for fmt, target in [('png', 'png'), ('svg', 'svg'), ('pdf', 'pdf'), ('html', 'r.html')]:
            try:
                export(store, {run_id!r}, fmt, {str(out)!r} + '/' + target)
            except ExportError as exc:
                print(fmt, 'refused:', exc)
        export(store, {run_id!r}, 'csv', {str(out)!r} + '/csv')
        sys.exit(main(['export', {run_id!r}, '--format', 'pdf', '--out', {str(out / 'cli')!r},
                       '--db', {str(store.path)!r}]))
    """, timeout=120)
    refused = [line for line in proc.stdout.splitlines() if " refused: " in line]
    assert [line.split()[0] for line in refused] == ["png", "svg", "pdf", "html"], proc.stdout + proc.stderr
    assert all(MATPLOTLIB_MISSING in line and "pip install matplotlib==3.10.7" in line for line in refused)
    assert "csv export works without it" in refused[0]
    assert proc.returncode == 2 and f"error: {MATPLOTLIB_MISSING}" in proc.stderr  # the CLI says it too
    assert [p.name for p in out.iterdir()] == ["csv"]  # nothing else was created, not even a folder
    assert len(list((out / "csv").glob("*.csv"))) >= 7


def test_pdf_export_from_the_cli_needs_no_display(store, run_id, experiment_id, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    for item in (run_id, experiment_id):
        proc = subprocess.run([sys.executable, "main.py", "export", item, "--format", "pdf", "--out",
                               str(tmp_path / item), "--db", str(store.path)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        paths = proc.stdout.split()
        names = {p.rsplit("/", 1)[-1].removeprefix(f"{item}-") for p in paths}
        assert names >= ({"busy.pdf", "timeline.pdf"} if item == run_id else {"sweep.pdf", "step-time.pdf"})
        for path in paths:
            data = Path(path).read_bytes()
            assert data.startswith(b"%PDF-") and data.count(b"/Type /Page ") == 1, path
    usage = subprocess.run([sys.executable, "main.py", "export", "--help"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=60)
    assert "{png,svg,pdf,csv,html,trace}" in usage.stdout


# ---- plots that read well: gaps, legends, headers ------------------------------------------------------
def moves(curve: ET.Element) -> int:
    """The separate pieces a drawn curve's path is made of (a gap starts a new one)."""
    return next(curve.iter(f"{SVG}path")).get("d").count("M")


def test_an_exported_run_breaks_its_lines_where_no_samples_were_taken(store, tmp_path):
    run_id = store.create_run(CONFIG)
    # 700 MiB for a second, nothing for 40 s (the sampler was off), then 0: no slope from 700 to 0
    store.add_samples(run_id, [{"t": t, "device": "cpu:0", "util": 20.0 if t < 1 else 100.0,
                                "mem_used": 700 * 2 ** 20 if t < 1 else 0.0}
                               for t in [0.1 * k for k in range(10)] + [41 + 0.1 * k for k in range(10)]])
    store.finish_run(run_id, "failed")
    names = {p.name.removeprefix(f"{run_id}-"): p for p in export(store, run_id, "svg", tmp_path / "svg")}
    for name, series in (("memory.svg", "cpu:0"), ("utilization.svg", "cpu:0"), ("utilization.svg", "cpu:0 raw")):
        curve = drawn(parse_svg(names[name]), "series")[series]
        assert moves(curve) == 2 and points(curve) == 20, (name, series)
    rows = read_csv(export(store, run_id, "csv", tmp_path / "csv")[1])   # memory: the samples, no break rows
    assert rows[0] == ["t (ms)", "mem cpu:0 (MiB)"] and len(rows) == 21 and all(r[1] for r in rows[1:])


def test_a_thinned_long_curve_keeps_its_gaps():
    y = [float(k % 100) for k in range(50_000)]
    y[25_000] = None   # one break among 50,000 points
    figure = Figure("long", "t", Axis("t", "s"), Axis("y"), series=[Series("y", list(range(50_000)), y, "#4e9af1")])
    assert moves(drawn(draw_svg(figure), "series")["y"]) == 2


def test_legends_sit_outside_the_data():
    from engine.export import drawing
    figure = Figure("f", "t", Axis("x", "s"), Axis("y", "%"),
                    series=[Series(f"run {i}", [0, 1, 2], [10.0 * i, 50.0, 90.0], palette.series_color(i))
                            for i in range(6)])
    picture = drawing._draw(figure)
    picture.canvas.draw()
    axes = picture.axes[0]
    legend = axes.get_legend().get_window_extent()
    assert legend.x0 >= axes.get_window_extent().x1   # right of the axes, over none of the curves


HEADER = re.compile(r"^[^_()]+( \([^()]+\))?$")   # "name" or "name (unit)", never "t0_s"
# counts, names, and the ratios that have no unit
UNITLESS = {"step", "runs", "micro-batches", "split", "series", "label", "strategy", "device", "kind", "loss",
            "stage balance"}


def assert_headers_have_units(rows: list[list[str]], where: str) -> None:
    """Every column header reads "name (unit)", but for counts and names; a column of numbers has a unit."""
    header = rows[0]
    for i, name in enumerate(header):
        assert HEADER.match(name), (where, name)
        numbers = [r[i] for r in rows[1:] if i < len(r) and re.fullmatch(r"-?[\d.e+-]+", r[i] or "")]
        if numbers and name not in UNITLESS:
            assert name.endswith(")"), (where, name)


def test_every_csv_has_a_unit_in_every_header(store, run_id, experiment_id, tmp_path):
    for item in (run_id, experiment_id):
        for path in export(store, item, "csv", tmp_path / item):
            assert_headers_have_units(read_csv(path), path.name)
    bars = read_csv(next(p for p in (tmp_path / experiment_id).iterdir() if p.name.endswith("-step-time.csv")))
    assert [r[0] for r in bars[1:]] == [f"split size {s}" for s, _ in SWEEP]   # labels, not 0.0, 1.0, ...


def test_a_drawn_file_carries_no_time_of_writing():
    """The same figure gives the same file: a re-export does not show as changed in version control."""
    from engine.export.drawing import draw
    figure = Figure(name="f", title="t", x=Axis("step"), y=Axis("loss"),
                    series=[Series("loss", [0, 1], [1.0, 0.5], palette.series_color(0))])
    assert b"<dc:date>" not in draw(figure, "svg") and b"/CreationDate" not in draw(figure, "pdf")


def test_trace_export_is_chrome_trace_events_that_perfetto_opens(store, run_id, tmp_path):
    """A process per device, every slice complete (ph, ts, dur, pid, tid) and nested on its thread, telemetry
    as counters, flows from one stage's work to the next's, on the run's one clock."""
    import json
    (path,) = export(store, run_id, "trace", tmp_path)
    assert path.name == f"{run_id}.trace.json"
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert set(names) == set(DEVICES) and len(set(names.values())) == len(DEVICES)
    slices = [e for e in events if e["ph"] == "X"]
    assert slices and all({"ph", "ts", "dur", "pid", "tid", "name"} <= set(e) for e in slices)
    assert all(e["dur"] >= 0 and "step" in e["args"] for e in slices)
    by_thread: dict = {}
    for e in sorted(slices, key=lambda e: (e["ts"], -e["dur"])):
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for thread in by_thread.values():
        open_ends: list[float] = []
        for e in thread:
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            assert not open_ends or e["ts"] + e["dur"] <= open_ends[-1] + 1e-6, "slices on one thread overlap"
            open_ends.append(e["ts"] + e["dur"])
    counters = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"utilization %", "memory MiB"}
    assert {e["pid"] for e in counters} == set(names.values())
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts and set(starts) == set(ends)
    for flow_id, start in starts.items():
        assert start["ts"] <= ends[flow_id]["ts"] and start["pid"] != ends[flow_id]["pid"]
    # the one clock: slices and counters both in microseconds since the run started
    assert min(e["ts"] for e in slices) == pytest.approx(1.0e6)
    assert min(e["ts"] for e in counters) == pytest.approx(0.0)


def test_trace_export_of_an_experiment_holds_its_runs_one_after_another(store, experiment_id, tmp_path):
    """Each run's devices a process named for its point, its clock moved by when it started; an experiment
    with no runs is refused with the reason (the app disables the action for it)."""
    with pytest.raises(ExportError, match="has no runs to trace"):
        export(store, experiment_id, "trace", tmp_path)
    exp_id = store.create_experiment("split-size", ExperimentPlan(repeats=1, base=CONFIG))
    runs = []
    for label in ("split size 8", "split size 16"):
        run_id = store.create_run(CONFIG, experiment_id=exp_id, label=label)
        store.add_steps(run_id, [step_event(s) for s in range(3)])
        store.finish_run(run_id, "finished", summary=from_json(RunSummary, {"run_id": run_id, "devices": DEVICES}))
        runs.append(run_id)
    started = {r.id: r.started for r in store.list_runs(experiment_id=exp_id)}
    (path,) = export(store, exp_id, "trace", tmp_path)
    document = json.loads(path.read_text())
    events = document["traceEvents"]
    names = sorted(e["args"]["name"] for e in events if e.get("name") == "process_name")
    assert names == ["split size 16 · cpu:0", "split size 16 · cpu:1",
                     "split size 8 · cpu:0", "split size 8 · cpu:1"]
    assert document["otherData"]["runs"] == sorted(runs, key=started.get)
    pids = {e["args"]["name"]: e["pid"] for e in events if e.get("name") == "process_name"}
    assert len(set(pids.values())) == 4
    first, second = sorted(runs, key=started.get)
    label = {first: "split size 8", second: "split size 16"} if first == runs[0] else \
        {first: "split size 16", second: "split size 8"}
    shift = (started[second] - started[first]) * 1e6
    starts = {run: min(e["ts"] for e in events if e.get("ph") == "X" and e["pid"] == pids[f"{label[run]} · cpu:0"])
              for run in runs}
    assert starts[first] == pytest.approx(1.0e6) and starts[second] == pytest.approx(1.0e6 + shift)


def test_profile_steps_store_a_profiler_trace_per_rank_exported_on_the_runs_clock(tmp_path):
    """`run --profile-steps 2`: each rank's torch.profiler trace is stored with the run, and the trace export
    puts its slices in that rank's device process, its profiled steps where the run's steps were."""
    import json

    from helpers import cli
    db = str(tmp_path / "runs.sqlite3")
    _, summary = cli("run", "--strategy", "pipeline", "--devices", "cpu:2", "--micro-batches", "2", "--width", "64",
                     "--depth", "4", "--batch-size", "64", "--steps", "5", "--warmup", "1", "--profile-steps", "2",
                     "--db", db, "--json", check_json=True)
    with Store(db) as store:
        profiles = store.profiles(summary["run_id"])
        assert [(rank, device) for rank, device, _, _ in profiles] == [(0, "cpu:0"), (1, "cpu:1")]
        steps = {s.step: s for s in store.steps(summary["run_id"])}
        intervals = store.timeline(summary["run_id"], steps=(1, 2))
        (path,) = export(store, summary["run_id"], "trace", tmp_path)
    events = json.loads(path.read_text())["traceEvents"]
    pids = {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    for device in ("cpu:0", "cpu:1"):
        marks = sorted((e for e in events if e["ph"] == "X" and e["pid"] == pids[device]
                        and str(e["name"]).startswith("splitscope step ")), key=lambda e: e["ts"])
        assert [m["name"] for m in marks] == ["splitscope step 1", "splitscope step 2"], device
        for mark, step in zip(marks, (1, 2), strict=True):
            # A rank's step is not the run's: in a pipeline the last stage starts its next step while the
            # first still finishes this one. What the rank measured inside its step lies inside its mark
            # (the mark's start is read a statement after the profiler opened it: microseconds, but a loaded
            # machine preempts a rank there: CI's run saw 2.03 ms. 50 ms of slack; the lines below hold the mark
            # to its own step of the run, not a neighbour's, which is what a misplaced mark would break).
            own = [(t0 * 1e6, t1 * 1e6) for s, d, _, t0, t1 in intervals if s == step and d == device]
            assert own, (device, step)
            slack = 50_000.0
            assert mark["ts"] - slack <= min(t0 for t0, _ in own), (device, step)
            assert max(t1 for _, t1 in own) <= mark["ts"] + mark["dur"] + slack, (device, step)
            # and the mark is that step of the run's, not a neighbour's
            assert (steps[step].t - steps[step].time_s) * 1e6 < mark["ts"] + mark["dur"], (device, step)
            assert mark["ts"] < steps[step].t * 1e6, (device, step)
        assert any(e["ph"] == "X" and e["pid"] == pids[device] and e.get("cat") == "cpu_op" for e in events)
    # each measured forward and backward names the stage and micro-batch the plan says it ran
    computed = [e for e in events if e["ph"] == "X" and e.get("cat") in ("forward", "backward")
                and e["args"]["step"] >= 1]
    assert computed and all(e["args"]["micro_batch"] in (0, 1) for e in computed)
    assert {e["name"] for e in computed if e["pid"] == pids["cpu:0"]} == {"forward 0F0", "forward 0F1",
                                                                          "backward 0B0", "backward 0B1"}
