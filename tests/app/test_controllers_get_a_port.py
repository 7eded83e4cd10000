"""Controllers get the app's model and the window's port, never the window (issue 55 item 3): checked on the
objects the window makes and on the controllers' source."""
from __future__ import annotations

import ast
from pathlib import Path

from app.controllers.window_port import WindowPort

CONTROLLERS = ("what_if", "runs", "plans", "experiments", "history_flow", "traces", "closing", "advise",
               "controls", "exporter", "store_flow")
SOURCE = Path(__file__).resolve().parents[2] / "app" / "controllers"



def test_each_controller_holds_the_model_and_the_port_never_the_window(quiet_window):
    win = quiet_window
    assert isinstance(win.port, WindowPort) and win.port is not win
    for name in CONTROLLERS:
        controller = getattr(win, name)
        held = vars(controller).values()
        assert not any(value is win for value in held), f"{name} holds the window"
        assert controller.model is win.model, name
        assert getattr(controller, "port", win.port) is win.port, f"{name}'s port is not the window's port"


def test_no_controller_names_the_window_in_its_code():
    """Not as a parameter, a variable or an attribute: what they may ask is the port's (window_port.py)."""
    found = []
    for path in sorted(SOURCE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            named = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                     else node.arg if isinstance(node, ast.arg) else None)
            if named in ("window", "w", "controls"):
                found.append(f"{path.name}:{node.lineno} {named}")
    assert not found, found


def test_the_status_line_and_the_log_follow_the_model(quiet_window):
    win = quiet_window
    win.model.log("recovered 3 runs", status=True)
    assert win.status_label.text() == "recovered 3 runs"
    assert "recovered 3 runs" in win.log_view.toPlainText()


def test_run_and_stop_follow_the_models_activity(quiet_window):
    win = quiet_window
    win.model.begin("run")
    assert win.stop_action.isEnabled() and not win.run_action.isEnabled() and not win.experiment.isEnabled()
    win.model.stop_asked()
    assert not win.stop_action.isEnabled() and win.run_reason.text() == "Stopping the run…"
    win.model.end()
    assert not win.stop_action.isEnabled() and win.experiment.isEnabled()
