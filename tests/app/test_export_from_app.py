"""File › Export and the plots' context-menu export: files appear, and existing ones are never replaced unasked."""
from __future__ import annotations

import csv
import struct
from pathlib import Path

import pytest
from PySide6 import QtWidgets

from engine.results import ExperimentPlan, RunSummary, Step, from_json
from engine.store import Store


def store_a_run(db_path, **create) -> str:
    """A finished run in the window's store, as RunSession would leave it (no worker needed); ``create``:
    Store.create_run's keywords (an experiment's run)."""
    with Store(db_path) as store:
        run_id = store.create_run({"strategy": "model-parallel", "model": "mlp", "width": 32, "depth": 4,
                                   "devices": "cpu:2", "split": [2], "steps": 4, "warmup": 1}, **create)
        store.add_steps(run_id, [
            Step(step=s, t=0.1 * (s + 1), time_s=0.1, samples=32, throughput=320.0 + s,
                 loss=2.3 - 0.1 * s, busy={"cpu:0": 0.5, "cpu:1": 0.4},
                 intervals={"cpu:0": [["forward", 0.1 * s, 0.1 * s + 0.04]],
                            "cpu:1": [["backward", 0.1 * s + 0.04, 0.1 * s + 0.08]]}) for s in range(4)])
        store.add_samples(run_id, [{"t": k * 0.1, "device": f"cpu:{d}", "util": 50.0, "mem_used": 2 ** 20}
                                   for k in range(5) for d in range(2)])
        store.finish_run(run_id, "finished", from_json(RunSummary, {
            "devices": ["cpu:0", "cpu:1"], "split": [2], "micro_batches": None,
            "step_time_s": {"mean": 0.1, "std": 0.01}, "throughput": {"mean": 321.0, "std": 1.0},
            "bubble": {"measured": 0.55, "theory": 0.5}, "devices_busy": [0.5, 0.4],
            "loss": {"first": 2.3, "last": 2.0}}))
    return run_id


@pytest.fixture
def questions(monkeypatch):
    """QMessageBox.question answers from a list (default Yes) and records what it was asked."""
    asked: list[str] = []
    answers: list = []

    def question(*args, **kwargs):
        asked.append(args[2] if len(args) > 2 else "")
        return answers.pop(0) if answers else QtWidgets.QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QtWidgets.QMessageBox, "question", question)
    return asked, answers


def export_action(window, text):
    return next(a for a in window.export_menu.actions() if a.text() == text)


def test_file_menu_exports_the_selected_run_and_asks_before_overwriting(qtbot, window, monkeypatch, tmp_path,
                                                                       questions):
    asked, answers = questions
    run_id = store_a_run(window.db_path)
    window.history.refresh()
    window.history.table.selectRow(0)
    assert window.export_target() == ("run", run_id)
    out = tmp_path / "exports"
    out.mkdir()
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory", lambda *a, **k: str(out))

    with qtbot.waitSignal(window.sigExported, timeout=20_000) as exported:
        export_action(window, "CSV tables…").trigger()
    paths = exported.args[0]
    assert asked == []                      # nothing was in the way: no question
    assert sorted(p.name for p in out.iterdir()) == sorted(p.rsplit("/", 1)[-1] for p in paths)
    rows = list(csv.reader((out / f"{run_id}-throughput.csv").open()))
    assert rows[0] == ["step", "throughput (samples/s)"] and len(rows) == 5
    assert "exported" in window.status_label.text()

    # Again into the same folder: asked; "No" leaves the files alone, "Yes" replaces them.
    (out / f"{run_id}-throughput.csv").write_text("mine")
    answers.append(QtWidgets.QMessageBox.StandardButton.No)
    export_action(window, "CSV tables…").trigger()
    assert len(asked) == 1 and "already exist" in asked[0] and f"{run_id}-" in asked[0]
    qtbot.wait(300)
    assert (out / f"{run_id}-throughput.csv").read_text() == "mine"
    with qtbot.waitSignal(window.sigExported, timeout=20_000):
        export_action(window, "CSV tables…").trigger()
    assert len(asked) == 2
    assert (out / f"{run_id}-throughput.csv").read_text().startswith("step,")

    # PNG (drawn off the UI thread) and the HTML report through the save dialog.
    with qtbot.waitSignal(window.sigExported, timeout=30_000) as exported:
        export_action(window, "PNG images…").trigger()
    png = [p for p in exported.args[0] if p.endswith(".png")]
    assert png and all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in png)
    width, height = struct.unpack(">II", Path(png[0]).read_bytes()[16:24])
    assert width > 100 and height > 100
    report = tmp_path / "report"             # no extension typed: .html is added
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", lambda *a, **k: (str(report), ""))
    with qtbot.waitSignal(window.sigExported, timeout=20_000) as exported:
        export_action(window, "HTML report…").trigger()
    assert exported.args[0] == [str(tmp_path / "report.html")]
    assert "<html" in (tmp_path / "report.html").read_text().lower()
    answers.append(QtWidgets.QMessageBox.StandardButton.No)
    export_action(window, "HTML report…").trigger()
    assert len(asked) == 3 and "report.html" in asked[2]


def test_plot_context_menu_export_asks_before_overwriting(qtbot, window, monkeypatch, tmp_path, questions):
    asked, answers = questions
    target = tmp_path / "throughput.csv"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    plot = window.plots.series_plots["throughput"]
    written = []
    plot.sigExported.connect(written.append)
    plot.export_actions["csv"].trigger()        # the context menu's "Export CSV…"
    assert written == [str(target)] and asked == []
    target.write_text("keep me")
    answers.append(QtWidgets.QMessageBox.StandardButton.No)
    plot.export_actions["csv"].trigger()
    assert len(asked) == 1 and "throughput.csv" in asked[0]
    assert target.read_text() == "keep me" and len(written) == 1
    plot.export_actions["csv"].trigger()        # Yes: replaced
    assert len(written) == 2 and target.read_text().startswith("series,")


def test_nothing_to_export_says_so(qtbot, window, monkeypatch):
    told = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "information", lambda *a, **k: told.append(a[1]))
    assert window.export_target() is None
    export_action(window, "SVG drawings…").trigger()
    assert told == ["Nothing to export"]


def test_file_menu_offers_every_format_the_engine_writes(window):
    from engine.export import FORMATS
    assert set(window.exporter.actions) == set(FORMATS)  # pdf too: a figure for a paper


def test_a_trace_of_an_experiment_in_view_is_written_or_refused_before_a_file_is_asked(qtbot, window, monkeypatch,
                                                                                     tmp_path):
    """The walk found the trace export, with an experiment in view, failing after the file was chosen. Its runs
    are traced one after another; an experiment without runs is said before any dialog."""
    import json
    told, asked = [], []
    monkeypatch.setattr(QtWidgets.QMessageBox, "information", lambda *a, **k: told.append(a[1]))
    target = tmp_path / "experiment.trace.json"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        lambda *a, **k: asked.append(a[1]) or (str(target), ""))
    with Store(window.db_path) as store:
        empty = store.create_experiment("compare-strategies", ExperimentPlan(repeats=1))
        experiment = store.create_experiment("compare-strategies", ExperimentPlan(repeats=1))
    store_a_run(window.db_path, experiment_id=experiment, label="naive")
    window.exporter.target = lambda: ("experiment", empty)
    assert not window.exporter.export_interactive("trace")
    assert told == ["Nothing to trace"] and asked == []
    window.exporter.target = lambda: ("experiment", experiment)
    with qtbot.waitSignal(window.sigExported, timeout=20_000) as exported:
        assert window.exporter.export_interactive("trace")
    assert exported.args[0] == [str(target)] and len(asked) == 1
    events = json.loads(target.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {"naive · cpu:0", "naive · cpu:1"}
