"""Fixtures for the app's tests: a private store and settings per test, a window, no leaked processes."""
from __future__ import annotations

import os

import psutil
import pytest

# A small model that trains in milliseconds a step on two cores (the brief's CI size).
SMALL = dict(width=64, depth=4, batch_size=64, steps=6)


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Every test gets its own run store and QSettings file: nothing touches the user's."""
    monkeypatch.setenv("SPLITSCOPE_DB", str(tmp_path / "runs.sqlite3"))
    monkeypatch.setenv("SPLITSCOPE_SETTINGS", str(tmp_path / "settings.ini"))
    monkeypatch.setenv("QT_QPA_PLATFORM", os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    return tmp_path


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


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
    """The real main window, shown, with its planner process and idle telemetry running."""
    from app.main_window import MainWindow
    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    if win.worker.is_running():
        with qtbot.waitSignal(win.sigRunFinished, timeout=20_000):
            win.stop_run()
    win.shutdown()


def set_small_mlp(win, strategy="model-parallel", devices="cpu:2", **overrides):
    """Choose mlp on cpu:2 through the panel's widgets, as a user would."""
    opts = dict(SMALL, **overrides)
    e = win.experiment
    e.model_combo.setCurrentIndex(e.model_combo.findData("mlp"))
    e.width_spin.setValue(opts["width"])
    e.depth_spin.setValue(opts["depth"])
    e.devices_combo.setCurrentText(devices)
    e.strategy_combo.setCurrentIndex(e.strategy_combo.findData(strategy))
    e.batch_spin.setValue(opts["batch_size"])
    e.steps_spin.setValue(opts["steps"])
    if "micro_batches" in opts:
        e.mb_mode.setCurrentIndex(e.mb_mode.findData("micro_batches"))
        e.mb_spin.setValue(opts["micro_batches"])


def wait_ready(qtbot, win, timeout=30_000, profiled=True):
    """Wait until validation passed (and the blocks are profiled): Run is enabled."""
    qtbot.waitUntil(lambda: win.run_action.isEnabled() and (not profiled or bool(win.split_view.blocks)),
                    timeout=timeout)
