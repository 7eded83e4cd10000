"""Fixtures for the app's tests: a private store and settings per test, a window, no leaked processes."""
from __future__ import annotations

import os

import psutil
import pytest


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Every test gets its own run store and QSettings file: nothing touches the user's."""
    monkeypatch.setenv("SPLITSCOPE_DB", str(tmp_path / "runs.sqlite3"))
    monkeypatch.setenv("SPLITSCOPE_SETTINGS", str(tmp_path / "settings.ini"))
    monkeypatch.setenv("QT_QPA_PLATFORM", os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    return tmp_path


def _children() -> set[int]:
    """This process's descendants, but for its fork server and its store process (they live as long as the
    test session)."""
    from engine.forkserver import shared_pid
    from engine.store import store_process_pid
    return {p.pid for p in psutil.Process().children(recursive=True)} - {shared_pid(), store_process_pid()}


@pytest.fixture(autouse=True)
def as_before_the_window():
    """A window runs the garbage collector on its own timer while it lives (app/services/ui_thread_gc.py) and
    puts this process's stores in the store process (app/services/window_store.py): a test must not leave a
    window's collector running, and the tests after it open their stores here, as the CLI does."""
    yield
    from app.services import ui_thread_gc
    from engine.store import serve_from_child
    serve_from_child(False)
    assert not ui_thread_gc.running(), "a window's garbage collector was left running"


@pytest.fixture(autouse=True)
def no_leftover_children():
    """Fail a test that leaves a child process (worker, rank, planner) behind; the root conftest checks tagged ones."""
    before = _children()
    yield
    procs = []
    for pid in _children() - before:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    # Give processes that are on their way out a moment to go, then name any that stayed.
    _gone, alive = psutil.wait_procs(procs, timeout=8.0)
    left = []
    for proc in alive:
        try:
            left.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    assert not left, f"processes left behind: {left}"


@pytest.fixture
def qapp_configured(qapp):
    from app.application import configure
    configure(qapp)
    return qapp


@pytest.fixture
def window(qtbot, qapp_configured):
    """The real main window, shown, with its planner process and idle telemetry running; the checks an
    experiment's thread makes run in a child, as ``app.launch`` has them (torch stays out of the window's
    process: beside Qt's threads it once crashed the test process)."""
    from app.main_window import MainWindow
    from engine.run.validate import validate_in_child
    validate_in_child(True)
    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    if win.experiments.is_running():
        with qtbot.waitSignal(win.sigExperimentFinished, timeout=30_000):
            win.stop_run()
    if win.worker.is_running():
        with qtbot.waitSignal(win.sigRunFinished, timeout=20_000):
            win.stop_run()
    win.shutdown()
    validate_in_child(False)


@pytest.fixture
def quiet_window(qtbot, qapp_configured):
    """The main window without its planner process or idle telemetry (each test starts what it needs)."""
    from app.main_window import MainWindow
    win = MainWindow(start_services=False)
    qtbot.addWidget(win)
    yield win
    win.shutdown()


@pytest.fixture
def window_at_1280(qtbot, quiet_window):
    """The quiet window shown at 1280x800, the size the README's screenshots and the issues' walks use."""
    from app_helpers import shown
    return shown(qtbot, quiet_window, (1280, 800))
