"""The window and its run store: no SQLite lock in the window's process for anything there to drop, a damaged
store that never keeps the window from opening, store failures on other threads shown in the window, and the
cyclic garbage collector kept on the UI thread."""
from __future__ import annotations

import gc
import os
import sqlite3
import threading
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from engine.store import Store, store_process_pid
from store_helpers import locks_held, read_elsewhere, store_with_runs, write_over_pages, write_runs_elsewhere
from tests.app.app_helpers import set_small_mlp, shown, wait_ready


def test_a_damaged_store_opens_the_window_with_a_notice_and_recover_brings_its_runs_back(qtbot, qapp_configured,
                                                                                          private_state):
    from app.main_window import MainWindow
    db = private_state / "runs.sqlite3"
    ids = store_with_runs(db)
    write_over_pages(db)
    win = shown(qtbot, MainWindow(start_services=False))
    kept = [p for p in private_state.iterdir() if p.name.startswith("runs.damaged-") and p.suffix == ".sqlite3"]
    assert len(kept) == 1 and db.exists()
    panel = win.center.error_panel
    assert panel.isVisible() and panel.action_button.isVisible() and panel.action_button.text() == "Recover runs"
    # one line above the plots (four squeezed them at 1280x800); the whole story behind Details
    assert panel.message.text() == "The run store was damaged and set aside; a fresh one starts."
    assert panel.details_button.text() == "Details" and not panel.traceback.isVisible()
    qtbot.mouseClick(panel.details_button, QtCore.Qt.MouseButton.LeftButton)
    details = panel.traceback.toPlainText()
    assert panel.traceback.isVisible() and f"the run store {db} is damaged" in details and str(kept[0]) in details
    assert win.history.records == []
    qtbot.mouseClick(panel.action_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(win.history.records) == 5, timeout=20_000)
    assert sorted(r.id for r in win.history.records) == sorted(ids)
    assert not panel.isVisible()
    assert f"recovered 5 runs and 0 experiments from {kept[0]}" in win.log_view.toPlainText()
    assert kept[0].exists()   # the damaged file stays where it was put
    win.shutdown()


def test_the_window_holds_no_lock_on_its_store_so_a_file_dialog_beside_it_loses_nothing(qtbot, qapp_configured,
                                                                                        private_state):
    from app.main_window import MainWindow
    db = private_state / "runs.sqlite3"
    win = shown(qtbot, MainWindow(start_services=False))
    ours = [win.store.create_run({"by": "window"})]
    # The dialog a user opens on the store's folder reads its files to learn their types (Qt's own,
    # offscreen), in this process; then other processes write and close the store.
    dialog = QtWidgets.QFileDialog(win, "Export", str(private_state))
    dialog.setOption(QtWidgets.QFileDialog.Option.DontUseNativeDialog)
    dialog.show()
    model = dialog.findChild(QtWidgets.QFileSystemModel)
    folder = model.index(str(private_state))
    qtbot.waitUntil(lambda: model.rowCount(folder) >= 3, timeout=10_000)   # the store, its -wal and -shm
    for row in range(model.rowCount(folder)):
        model.type(model.index(row, 0, folder))
    dialog.close()
    assert locks_held(os.getpid(), db) == [] and locks_held(store_process_pid(), db)
    theirs = write_runs_elsewhere(db, 2)
    ours.append(win.store.create_run({"by": "window"}))
    win.history.refresh()
    assert {r.id for r in win.history.records} == set(ours + theirs)
    assert read_elsewhere(db) == (set(ours + theirs), True)
    win.shutdown()


def test_a_store_error_in_an_experiments_thread_shows_in_the_window_and_run_comes_back(qtbot, window,
                                                                                       monkeypatch):
    """What kept a window on "An experiment is in progress" for minutes: the run's store, opened on its session's
    thread, failed there; the thread ended without a word and the experiment waited on it for ever."""
    import engine.run.session
    real_open = engine.run.session.open_store

    def failing_on_the_session_thread(path=None):
        if threading.current_thread().name.startswith("run-session"):
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real_open(path)

    monkeypatch.setattr(engine.run.session, "open_store", failing_on_the_session_thread)
    set_small_mlp(window, strategy="model-parallel", width=32, depth=4, batch_size=32, steps=3)
    window.experiments.menu.repeats_spin.setValue(1)
    wait_ready(qtbot, window, profiled=False)   # Run waits for the planner's first check, not for the store
    with qtbot.waitSignal(window.sigExperimentFinished, timeout=30_000) as ended:
        window.experiments.menu.preset_actions["schedules"].trigger()
    assert ended.args[0].status == "failed"
    panel = window.center.error_panel
    assert panel.isVisible() and "database disk image is malformed" in panel.message.text()
    assert "cannot write the run store" in panel.message.text()
    qtbot.waitUntil(window.run_action.isEnabled, timeout=5_000)
    assert not window.stop_action.isEnabled() and not window.experiments.is_running()


class Cycle(QtCore.QObject):
    """A Qt object only the cyclic collector can free."""

    def __init__(self):
        super().__init__()
        self.me = self


def test_qt_objects_in_cycles_are_freed_on_the_ui_thread_however_much_another_thread_allocates(qtbot, window):
    """An export's thread allocating past the collector's thresholds once collected a Qt object there, and the
    process aborted. Without the window's collector the cycle is freed on the allocating thread (the first
    assertion fails), with it on the UI thread's timer."""
    assert window.collector.running and not gc.isenabled()
    freed_on: list[bool] = []
    cycle = Cycle()
    cycle.destroyed.connect(lambda *_: freed_on.append(threading.current_thread() is threading.main_thread()),
                            QtCore.Qt.ConnectionType.DirectConnection)
    del cycle
    kept: list = []
    churn = threading.Thread(target=lambda: kept.extend([[]] for _ in range(gc.get_threshold()[0] * 50)),
                             name="report-export")
    churn.start()
    churn.join()
    assert freed_on == []
    qtbot.waitUntil(lambda: freed_on == [True], timeout=10_000)
    enabled_before_the_window = window.collector.enabled_before
    window.shutdown()
    assert gc.isenabled() == enabled_before_the_window   # as it was (the suite keeps it off: tests/conftest.py)


def test_a_history_load_that_fails_on_its_thread_is_said_in_the_window(qtbot, qapp_configured, private_state):
    """A stored run whose rows cannot be read back (a step's and its summary written over): the history still
    lists every run, the loader's thread fails on that one, the window says why, and the other runs still open."""
    from app.main_window import MainWindow
    from tests.app.test_export_from_app import store_a_run
    db = private_state / "runs.sqlite3"
    good, bad = store_a_run(db), store_a_run(db)
    with Store(db) as store:
        store._db.execute("UPDATE runs SET summary='{not json' WHERE id=?", (bad,))
        store._db.execute("UPDATE steps SET busy='{not json' WHERE run_id=? AND step=2", (bad,))
    win = shown(qtbot, MainWindow(start_services=False))
    assert sorted(win.history.run_ids()) == sorted([good, bad])
    assert "its stored summary cannot be read" in win.history.records[win.history.run_ids().index(bad)].error
    row = win.history.run_ids().index(bad)
    with qtbot.waitSignal(win.history.sigLoaded, timeout=10_000):
        win.history.table.selectRow(row)
    qtbot.waitUntil(win.center.error_panel.isVisible, timeout=5_000)
    assert "could not read the runs" in win.center.error_panel.message.text()
    assert "could not read the runs" in win.log_view.toPlainText()
    with qtbot.waitSignal(win.sigHistoryShown, timeout=10_000) as shown_runs:
        win.history.table.selectRow(win.history.run_ids().index(good))
    assert shown_runs.args[0] == [good]
    win.shutdown()


def test_an_export_that_fails_on_its_thread_is_said_and_the_next_one_runs(qtbot, qapp_configured, private_state,
                                                                          monkeypatch, tmp_path):
    from app.main_window import MainWindow
    from tests.app.test_export_from_app import store_a_run
    warned: list[str] = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *args, **kwargs: warned.append(args[2]))
    run_id = store_a_run(private_state / "runs.sqlite3")
    win = shown(qtbot, MainWindow(start_services=False))
    blocked = tmp_path / "a-file"
    blocked.write_text("a file where the export's folder would be")
    with qtbot.waitSignal(win.sigExportFailed, timeout=30_000) as failed:
        win.exporter.start(run_id, "csv", blocked / "out")
    assert failed.args[0].startswith("export failed:") and warned == [failed.args[0]]
    assert not win.exporter.busy and "export failed" in win.log_view.toPlainText()
    with qtbot.waitSignal(win.sigExported, timeout=30_000) as done:
        win.exporter.start(run_id, "csv", tmp_path / "out")
    assert done.args[0] and all(Path(p).exists() for p in done.args[0])
    win.shutdown()
