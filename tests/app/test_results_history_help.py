"""The experiment result's bar labels and best, the history's columns and scroll, and the Help menu: widgets
fed stored data (no run)."""
from __future__ import annotations

import pytest
from PySide6 import QtGui, QtWidgets

from app_helpers import shown
from engine.results import ExperimentResult, RunSummary, from_json

LABELS = ["single", "model-parallel", "pipeline", "data-parallel", "ddp", "balanced (automatic)"]


def point(label: str, ms: float, x=None) -> dict:
    return {"label": label, "strategy": "pipeline", "x": x, "devices": ["cpu:0", "cpu:1"],
            "step_time_s": {"mean": ms / 1000, "std": 0.1 / 1000}, "throughput": {"mean": 1000.0, "std": 1.0},
            "bubble": {"measured": 0.3, "theory": 0.2}, "run_ids": ["a"]}


def result_of(points: list[dict], best: str, name="compare-strategies", **extra) -> ExperimentResult:
    return from_json(ExperimentResult, {"experiment_id": "exp", "name": name, "best": best, "points": points,
                                        **extra})


@pytest.fixture
def results(qtbot, qapp_configured):
    from app.views.experiment_results import ExperimentResultsView
    return shown(qtbot, ExperimentResultsView())


def test_every_bar_keeps_a_label_that_fits_its_room_at_any_width(qtbot, results):
    results.show_result(result_of([point(label, 5.0 + i) for i, label in enumerate(LABELS)], "pipeline"))
    metrics = QtGui.QFontMetricsF(QtGui.QFont())
    axis = results.bars.getPlotItem().getAxis("bottom")
    seen = {}
    for width in (1600, 700, 420, 300):
        results.resize(width, 600)
        qtbot.waitUntil(lambda: results.bars.label_room is not None
                        and abs(results.bars.label_room - results.bars.getPlotItem().getViewBox().width()
                                / 6.2 + 8) < 1, timeout=3_000)
        texts = results.bars.tick_texts
        assert len(texts) == len(LABELS) and axis._tickLevels == [list(enumerate(texts))]
        for label, text in zip(LABELS, texts, strict=True):
            lines = text.split("\n")
            assert all(line.strip(" …") for line in lines), (width, texts)      # never an empty label
            assert all(metrics.horizontalAdvance(line) <= results.bars.label_room for line in lines), (width, texts)
            assert label.startswith(lines[0].removesuffix("…")), (label, text)   # its own words, from the start
        seen[width] = texts
    assert seen[1600] == LABELS                              # room enough: every label whole, on one line
    assert seen[420] != LABELS and "\n" in "".join(seen[420])  # narrower: wrapped, then elided
    assert any("…" in text for text in seen[300])


def test_the_best_is_marked_alike_in_the_bars_the_table_and_the_sweep(results):
    compare = result_of([point("single", 9.0), point("pipeline", 7.0), point("ddp", 8.0)], "pipeline")
    results.show_result(compare)
    assert results.best_marks() == {"bars": "pipeline", "table": "pipeline", "sweep": None}   # no sweep here
    # A sweep whose best is no swept point: the automatic split, marked where it splits.
    sweep = result_of([point("split 1", 9.0, 1), point("split 2", 7.5, 2), point("split 3", 8.0, 3),
                       point("balanced (automatic)", 7.0)], "balanced (automatic)", name="split-point",
                      automatic_split=[2])
    results.show_result(sweep)
    assert results.best_marks() == {"bars": "balanced (automatic)", "table": "balanced (automatic)",
                                    "sweep": "balanced (automatic)"}
    assert results.sweep.best_xy == (2.0, 7.0)
    swept = result_of([point("split 1", 9.0, 1), point("split 2", 7.5, 2)], "split 2", name="split-point")
    results.show_result(swept)
    assert results.best_marks() == {"bars": "split 2", "table": "split 2", "sweep": "split 2"}


def stored_runs(store, n: int) -> list[str]:
    ids = []
    for k in range(n):
        pipelined = k % 2 == 0
        run_id = store.create_run({"strategy": "pipeline" if pipelined else "single", "model": "mlp", "width": 64,
                                   "depth": 4, "devices": "cpu:2" if pipelined else "cpu:1",
                                   "split": [2] if pipelined else None, "micro_batches": 4 if pipelined else None,
                                   "schedule": "1f1b" if k % 4 == 0 else "gpipe", "batch_size": 32 + 32 * (k % 3),
                                   "input_prep": "in-step" if k % 5 == 0 else "ahead", "steps": 8 + k % 2,
                                   "warmup": 2, "seed": 0})
        store.finish_run(run_id, "finished", from_json(RunSummary, {
            "devices": ["cpu:0", "cpu:1"] if pipelined else ["cpu:0"], "split": [2] if pipelined else None,
            "step_time_s": {"mean": 0.01, "std": 0.0}}))
        ids.append(run_id)
    return ids


def test_the_history_shows_what_tells_runs_apart_one_line_a_run_and_resets_its_scroll(qtbot, qapp_configured,
                                                                                      tmp_path):
    from app.views.history_panel import HistoryPanel
    from engine.store import Store
    store = Store(tmp_path / "history.sqlite3")
    ids = stored_runs(store, 60)
    history = HistoryPanel(store)
    qtbot.addWidget(history)
    history.resize(700, 260)
    history.show()
    qtbot.waitExposed(history)
    history.refresh()
    table = history.table
    qtbot.waitUntil(lambda: table.verticalScrollBar().maximum() > 0 and table.horizontalScrollBar().maximum() > 0,
                    timeout=3_000)
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    for name in ("model", "strategy", "devices", "split", "µ-batches", "schedule", "batch", "input prep",
                 "other settings"):
        assert name in headers
    column = {name: [table.item(r, headers.index(name)).text() for r in range(table.rowCount())]
              for name in headers}
    assert set(column["schedule"]) == {"1f1b", "gpipe", "—"}          # "—": no schedule for a single device
    assert set(column["batch"]) == {"32", "64", "96"}
    assert set(column["input prep"]) == {"in-step", "ahead"}
    assert set(column["µ-batches"]) == {"4", "—"}
    assert set(column["other settings"]) == {"steps 8", "steps 9"}   # warm-up and seed are alike: not repeated
    # One line of text a row: the tab shows as many runs as its height holds.
    assert table.rowHeight(0) <= table.fontMetrics().height() + 6
    # Scrolled away, a refresh shows the newest runs from the first column again.
    table.verticalScrollBar().setValue(table.verticalScrollBar().maximum())
    table.horizontalScrollBar().setValue(table.horizontalScrollBar().maximum())
    assert table.verticalScrollBar().value() > 0 and table.horizontalScrollBar().value() > 0
    history.refresh()
    assert table.verticalScrollBar().value() == 0 and table.horizontalScrollBar().value() == 0
    # A run selected for the user (the oldest: the last row) is scrolled into view.
    history.select_ids([ids[0]])
    last = table.rowCount() - 1
    assert table.viewport().rect().intersects(table.visualRect(table.model().index(last, 0)))
    store.close()


def test_the_help_menu_says_the_versions_the_docs_and_every_shortcut(qtbot, qapp_configured):
    from app.main_window import MainWindow
    win = MainWindow(start_services=False)
    qtbot.addWidget(win)
    try:
        menus = {m.title().replace("&", ""): m for m in win.menuBar().findChildren(QtWidgets.QMenu)}
        assert "Help" in menus
        actions = {a.text(): a for a in menus["Help"].actions()}
        assert set(actions) == {"Keyboard shortcuts", "Documentation", "About Splitscope"}
        assert actions["Keyboard shortcuts"].shortcut().toString() == "F1"
        actions["About Splitscope"].trigger()
        text = win.help.dialog.text()
        import importlib.metadata
        torch_version = importlib.metadata.version("torch")
        assert "Splitscope&nbsp;&nbsp;</td><td><b>0.1.0</b>" in text and "Qt " in text
        assert f"torch&nbsp;&nbsp;</td><td><b>{torch_version}" in text   # found without importing torch
        actions["Documentation"].trigger()
        assert "docs/architecture.md" in win.help.dialog.text() and "file://" in win.help.dialog.text()
        actions["Keyboard shortcuts"].trigger()
        text = win.help.dialog.text()
        for keys in ("Ctrl+R", "Esc", "Ctrl+Q", "F5", "F1"):
            assert f"<b>{keys}</b>" in text, text
        assert isinstance(win.help.dialog, QtWidgets.QMessageBox)
        win.help.dialog.close()
    finally:
        win.shutdown()
