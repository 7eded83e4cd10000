"""File › Open traces… (app/controllers/trace_flow.py): a folder of a job's profiler traces opened as a run of kind
trace, read in a child process with each file said, each rank a device with its lanes in the timeline, the run in
the history; a folder that holds no trace said in one line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6 import QtGui, QtWidgets

from engine.figures.timeline import LANE_HEIGHT
from helpers import cli
from tests.app.app_helpers import shown

FOLDER = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta_trace_filter"
READ_S = 60   # a fresh interpreter reading two small rank files and storing them: 2-4 s here


def _action(win, text: str) -> QtGui.QAction:
    return next(a for a in win.findChildren(QtGui.QAction) if a.text() == text)


def test_a_folder_of_traces_opens_as_a_run_with_each_ranks_lanes_and_stays_in_the_history(qtbot, qapp_configured,
                                                                                        monkeypatch):
    from app.main_window import MainWindow
    win = shown(qtbot, MainWindow(start_services=False))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory", lambda *a, **k: str(FOLDER))
    told = []
    win.traces.reader.sigProgress.connect(lambda done, total, path: told.append((done, total)))
    with qtbot.waitSignal(win.sigHistoryShown, timeout=READ_S * 1000) as shown_runs:
        _action(win, "Open traces…").trigger()   # File › Open traces…, its dialog answering the folder
    assert told == [(1, 2), (2, 2)]
    (run_id,) = shown_runs.args[0]
    assert f"stored as run {run_id}" in win.status_label.text()

    # the history lists it as a run of kind trace, its ranks its devices
    (record,) = [r for r in win.history.records if r.id == run_id]
    assert record.config.strategy == "trace" and record.summary.devices == ["rank 0", "rank 1"]
    assert win.history.selected_ids() == [run_id]
    row = [win.history.table.item(0, c).text() for c in range(win.history.table.columnCount())]
    assert "traces: hta_trace_filter" in row and "trace" in row and "rank 0,rank 1" in row

    # each rank's lane drawn: its kernels by kind and its idle gaps by cause, in its colours
    timeline = win.plots.timeline
    assert [key for key, _ in timeline.lanes] == ["rank 0", "rank 1"]
    assert {row[1] for row in timeline.rows} == {"rank 0", "rank 1"}
    for kind in ("compute", "communication", "host-wait"):
        bars = timeline.bars.by_kind[kind].opts
        heights = np.asarray(bars["height"])
        assert set(np.round(np.asarray(bars["y0"]) + heights / 2).astype(int)) == {0, 1}, kind
        assert (heights < LANE_HEIGHT).all() == (kind == "host-wait")   # an idle gap is a thin band
    assert "host-wait" in win.plots.bubble.legend.text()
    assert any("GPU idles" in text for text in win.plots.findings.texts())   # the job's findings
    win.shutdown()


def test_a_folder_with_no_trace_is_said_in_one_line(qtbot, qapp_configured, tmp_path):
    from app.main_window import MainWindow
    win = shown(qtbot, MainWindow(start_services=False))
    (tmp_path / "rank-0.json").write_text('{"not": "a trace"}')
    with qtbot.waitSignal(win.traces.sigFailed, timeout=READ_S * 1000) as failed:
        win.traces.open_paths([str(tmp_path)])
    (text,) = failed.args
    assert "rank-0.json: not a trace" in text and "\n" not in text
    assert win.status_label.text() == text
    assert not win.history.records
    win.shutdown()


def test_a_runs_own_profiler_traces_open_beside_it(qtbot, qapp_configured):
    """File › Open the run's profiler traces: the selected run's stored traces (run --profile-steps) read in a child
    into a run of kind trace named for it, and the two shown compared; with no run selected, said first."""
    from app.main_window import MainWindow
    win = shown(qtbot, MainWindow(start_services=False))
    _action(win, "Open the run's profiler traces").trigger()
    assert "Select one run in the history" in win.status_label.text()
    _, summary = cli("run", "--devices", "cpu:1", "--width", "32", "--depth", "2", "--batch-size", "16", "--steps",
                     "3", "--warmup", "1", "--profile-steps", "1", "--db", win.db_path, "--json", check_json=True)
    source = summary["run_id"]
    win.history.refresh()
    with qtbot.waitSignal(win.sigHistoryShown, timeout=READ_S * 1000):
        win.history.select_ids([source])
    with qtbot.waitSignal(win.sigHistoryShown, timeout=READ_S * 1000,
                          check_params_cb=lambda ids: len(ids) == 2) as both:
        _action(win, "Open the run's profiler traces").trigger()
    (read,) = set(both.args[0]) - {source}
    assert set(both.args[0]) == {source, read}
    (record,) = [r for r in win.history.records if r.id == read]
    assert record.config.strategy == "trace" and record.summary.model == f"traces: run {source}'s profiler traces"
    assert any("CPU ops only" in note for note in record.summary.notes)   # a CPU's trace: no GPU kernels, said
    win.shutdown()
