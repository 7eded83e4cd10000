"""The app's state without a window: the run monitor fed by worker events, and the rules that block Run."""
from __future__ import annotations

import pytest

from app.state.live_data import RunProgress
from app.state.run_rules import Activity, blocked_reason, ready_text
from no_qt import run_without_qt

STARTED = {"type": "started", "devices": [{"name": "cuda:0"}, {"name": "cuda:0"}, {"name": "cuda:1"}],
           "theory_bubble": 0.2, "notes": ["why"], "split": [3], "micro_batches": 4}


def step(k: int, time_s: float, busy: dict) -> dict:
    return {"type": "step", "step": k, "time_s": time_s, "busy": busy}


def test_the_run_monitor_follows_a_run_from_its_events():
    run = RunProgress(run_id="r1", steps_total=10)
    run.apply({"type": "launched", "pids": {"0": 1}})          # known to the window, nothing to keep here
    assert run.status == "idle"
    run.apply(STARTED)
    assert run.status == "running" and run.devices == ["cuda:0", "cuda:1"]  # two stages on one GPU: one device
    assert (run.theory, run.notes, run.split, run.micro_batches) == (0.2, ["why"], [3], 4)
    for k in range(4):
        run.apply(step(k, 0.5, {"cuda:0": 0.75, "cuda:1": 0.25}))
    assert run.steps_done == 4 and run.time_left_s() == pytest.approx(3.0)  # 6 steps of 0.5 s left
    assert run.measured_bubble() == pytest.approx(0.5) and run.theory_bubble() == 0.2
    run.apply({"type": "warning", "message": "slow"})
    run.apply({"type": "error", "message": "rank 1 died", "rank": 1})
    run.apply({"type": "finished", "status": "failed",
               "summary": {"bubble": {"measured": 0.4, "theory": None}}})
    assert run.warnings == ["slow"] and run.error["rank"] == 1
    assert run.measured_bubble() == 0.4 and run.theory_bubble() is None  # the summary's figures, once it ends


@pytest.mark.parametrize("activity, problems, check, reason", [
    (Activity(), [], "ok", None),
    (Activity(), [], "pending", "Checking the configuration…"),
    (Activity(), [], "unavailable", None),
    (Activity(run=True), [], "ok", "A run is in progress."),
    (Activity(run=True, stopping=True), [], "ok", "Stopping the run…"),
    (Activity(experiment=True), [], "ok", "An experiment is in progress."),
    (Activity(experiment=True, stopping=True), [], "ok", "Stopping the experiment…"),
    (Activity(), [{"option": "micro_batches", "message": "must divide 64"}, {"option": "split", "message": "x"}],
     "problems", "Cannot run: --micro-batches: must divide 64 (and 1 more)"),
    (Activity(), [{"option": "config", "message": "broken"}], "problems", "Cannot run: config: broken"),
    (Activity(run=True), [{"option": "split", "message": "x"}], "problems", "A run is in progress."),
])
def test_run_is_blocked_while_busy_checking_or_wrong_and_says_why(activity, problems, check, reason):
    assert blocked_reason(activity, problems, check) == reason


def test_the_line_under_run_says_when_nobody_checks():
    assert ready_text(None, "ok") == "Ready: Ctrl+R runs, Esc stops."
    assert ready_text(None, "unavailable").startswith("Validation is unavailable")
    assert ready_text("A run is in progress.", "unavailable") == "A run is in progress."


def test_the_state_modules_need_no_qt():
    proc = run_without_qt("""
        import app.state.live_data, app.state.run_rules, app.state.units
        assert not [m for m in sys.modules if m.startswith(("PySide6", "pyqtgraph"))]
    """)
    assert proc.returncode == 0, proc.stderr


def test_the_window_finds_its_style_sheet_icon_and_planner():
    """Paths from app/ subpackages to the repository's resources/ and to the planner's module."""
    from pathlib import Path

    from app.services import planner_client
    from app.views import theme
    assert theme.style_sheet()  # "" when resources/style.qss is not where the theme looks
    assert Path(theme.icon_path("splitscope.svg")).is_file()
    assert (planner_client.ROOT / "app" / "services" / "planner_service.py").is_file()
