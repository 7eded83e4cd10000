"""Run › Watch a script…: the user's own script as a run in the window (app/views/watch_dialog.py,
RunFlow.watch_script), drawn as any run."""
from __future__ import annotations

from PySide6 import QtWidgets

from app_helpers import shown, wait_steps
from procs import ROOT

EXAMPLE = ROOT / "examples" / "ddp_train.py"
RUN_TIMEOUT_MS = 120_000


def test_the_watch_dialog_checks_as_it_is_typed_and_makes_the_scripts_run(qtbot, tmp_path):
    from app.views.watch_dialog import WatchDialog
    dialog = shown(qtbot, WatchDialog())
    assert not dialog.watch_button.isEnabled() and "script: give the training script" in dialog.problem.text()
    dialog.script.setText(str(tmp_path / "missing.py"))
    assert "script: no such file" in dialog.problem.text()
    bad = tmp_path / "bad.py"
    bad.write_text("def main(:\n")
    dialog.script.setText(str(bad))
    assert "line 1: invalid syntax" in dialog.problem.text()
    dialog.script.setText(str(EXAMPLE))
    dialog.args.setText("--steps '4")
    assert "arguments: No closing quotation" in dialog.problem.text() and not dialog.watch_button.isEnabled()
    dialog.args.setText("--steps 4 --decode-ms 0.5")
    dialog.devices.setText("cpu:x")
    assert dialog.problem.text().startswith("devices:")
    dialog.devices.setText("cpu:2")
    assert dialog.watch_button.isEnabled() and dialog.problem.isHidden()
    config = dialog.config()
    assert (config.strategy, config.script, config.script_args, config.devices, config.steps) == \
        ("script", str(EXAMPLE), "--steps 4 --decode-ms 0.5", "cpu:2", 0)
    assert config.script_cwd == str(EXAMPLE.parent)   # relative paths in its arguments read beside it
    assert config.hang_timeout_s == 600   # as main.py watch: evaluation between steps is no hang
    # over other machines' agents: the nodes and their token checked as typed, the devices each node's own
    dialog.nodes.set_nodes("10.0.0.2:29400,nowhere")
    assert "nodes:" in dialog.problem.text() and not dialog.watch_button.isEnabled()
    token = tmp_path / "token"
    token.write_text("a-token-nobody-else-reads-" + "x" * 32 + "\n")
    token.chmod(0o600)
    dialog.nodes.set_nodes("10.0.0.2:29400,10.0.0.3:29400")
    dialog.nodes.set_token_file(str(token))
    dialog.devices.setText("cpu:1")
    assert dialog.watch_button.isEnabled(), dialog.problem.text()
    assert (dialog.config().nodes, dialog.config().token_file) == ("10.0.0.2:29400,10.0.0.3:29400", str(token))
    reopened = shown(qtbot, WatchDialog(**dialog.fields()))   # as Run › Watch a script… opens it next time
    assert reopened.config() == dialog.config()


def test_watch_a_script_from_the_run_menu_shows_live_steps_the_timeline_and_the_history(qtbot, window,
                                                                                        monkeypatch):
    """The DDP example watched from the window: live steps, each device's kinds on the timeline, the script's
    own output in the Log tab, and the run in the history under its script's name."""
    from app.views.watch_dialog import WatchDialog

    def fill_and_accept(dialog):
        dialog.script.setText(str(EXAMPLE))
        dialog.args.setText("--steps 30 --batch-size 32 --decode-ms 0.5")
        assert dialog.watch_button.isEnabled(), dialog.problem.text()
        return QtWidgets.QDialog.DialogCode.Accepted
    monkeypatch.setattr(WatchDialog, "exec", fill_and_accept)
    action = next(a for a in window.menuBar().findChildren(QtWidgets.QMenu)
                  for a in a.actions() if a.text() == "Watch a script…")
    assert action.isEnabled()
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        action.trigger()
        qtbot.waitUntil(lambda: not action.isEnabled() and not window.run_action.isEnabled(), timeout=10_000)
        wait_steps(qtbot, window, 2)
    info = finished.args[0]
    assert info.status == "finished", info
    assert info.summary.strategy == "script" and info.summary.model == "ddp_train.py"
    plots = window.plots
    assert plots.series_plots["throughput"].point_count() == 30
    assert {r[1] for r in plots.timeline.rows} == {"cpu:0", "cpu:1"}
    assert {"forward", "backward", "communication", "data"} <= {r[2] for r in plots.timeline.rows}
    assert "final loss" in window.log_view.toPlainText()
    assert window.history.run_ids()[0] == info.run_id and action.isEnabled()
    # a script that ends by itself: no count to reach, no time left guessed; the bar stops full
    assert window.progress_bar.maximum() == window.progress_bar.value() == 1 and window.run_box.time_left.text() == ""
    assert window.status_label.text().startswith("Finished 30 steps")
    assert window.runs.last_watch["script"] == str(EXAMPLE)   # the dialog opens with it next time
