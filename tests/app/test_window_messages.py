"""What the window tells the user without a run: the Log's levels, and telemetry that cannot start."""
from __future__ import annotations


def test_warnings_and_errors_stand_out_in_the_log(quiet_window):
    from app.views import theme
    quiet_window.log("planner ready")
    quiet_window.log("warning: slow", level="warning")
    quiet_window.log("run failed: the worker was killed\nTraceback line", level="error")
    log = quiet_window.log_view
    assert [log.level_color(i) for i in range(3)] == [None, theme.WARNING.lower(), theme.ERROR.lower()]
    assert log.toPlainText().endswith("run failed: the worker was killed\nTraceback line")


def test_telemetry_that_cannot_start_says_why_in_the_log_and_the_status_bar(qtbot, quiet_window, monkeypatch):
    import engine.telemetry

    def no_targets():
        raise RuntimeError("NVML is broken")

    monkeypatch.setattr(engine.telemetry, "all_targets", no_targets)
    with qtbot.waitSignal(quiet_window.idle.sigUnavailable, timeout=5_000):
        quiet_window.idle.start()
    said = "telemetry unavailable: RuntimeError: NVML is broken"
    assert quiet_window.status_label.text() == said
    assert quiet_window.log_view.toPlainText().endswith(said)
    assert not quiet_window.idle.active
