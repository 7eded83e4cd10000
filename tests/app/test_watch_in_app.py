"""Run › Watch a script…: the user's own script as a run in the window (app/views/watch_dialog.py,
RunFlow.watch_script), drawn as any run."""
from __future__ import annotations

import html
import re

from PySide6 import QtCore, QtWidgets

from app_helpers import shown, wait_steps
from procs import ROOT

EXAMPLE = ROOT / "examples" / "ddp_train.py"
RUN_TIMEOUT_MS = 120_000
# A few optimizer steps of a tiny model: a watched script in seconds, whichever way it is started.
TINY = """\
import os
import torch
print("ranks:", os.environ.get("WORLD_SIZE", "none"))
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("tiny done")
"""
FAILING = """\
import logging


def load_the_data():
    raise RuntimeError("the data folder is gone")


print("about to fail")
logging.warning("no checkpoint to resume from")   # on stderr, as a script's logging writes by default
load_the_data()
"""


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
        # the watched command in the form's place, read only, while it runs (asked as it starts: its 30 steps
        # take half a second once the ranks are up, and may end within wait_steps)
        assert window.watched.isVisible() and not window.experiment.isVisible()
        assert str(EXAMPLE) in window.watched.values["Script"].text()
        assert window.watched.values["Arguments"].text() == "--steps 30 --batch-size 32 --decode-ms 0.5"
        wait_steps(qtbot, window, 2)
    info = finished.args[0]
    assert info.status == "finished", info
    assert info.summary.strategy == "script" and info.summary.model == "ddp_train.py"
    plots = window.plots
    assert window.experiment.isVisible() and not window.watched.isVisible()   # the form back
    assert [row.code for row in plots.findings.rows][:len(info.summary.findings)] == \
        [f.code for f in info.summary.findings]   # the script's findings under the plots
    counted = [d.device for d in (info.summary.efficiency.devices if info.summary.efficiency else [])
               if d.mfu is not None]
    assert set(counted) <= set(plots.series_plots["efficiency"].series_keys())   # its MFU, known at its end
    assert plots.series_plots["throughput"].point_count() == 30
    assert {r[1] for r in plots.timeline.rows} == {"cpu:0", "cpu:1"}
    assert {"forward", "backward", "communication", "data"} <= {r[2] for r in plots.timeline.rows}
    assert "final loss" in window.log_view.toPlainText()
    assert window.history.run_ids()[0] == info.run_id and action.isEnabled()
    # a script that ends by itself: no count to reach, no time left guessed; the bar stops full
    assert window.progress_bar.maximum() == window.progress_bar.value() == 1 and window.run_box.time_left.text() == ""
    assert window.status_label.text().startswith("Finished 30 steps")
    assert window.runs.last_watch["script"] == str(EXAMPLE)   # the dialog opens with it next time


def test_the_watch_dialog_runs_a_script_as_plain_python_or_as_torchrun_ranks(qtbot, tmp_path):
    """As `watch -- python SCRIPT.py` and `watch -- SCRIPT.py`: the choice's words are the engine's
    (SCRIPT_LAUNCHES); plain python offers one device (auto) and no nodes, and the config says how it starts."""
    from app.views.watch_dialog import WatchDialog
    from engine.config import SCRIPT_LAUNCHES
    script = tmp_path / "tiny.py"
    script.write_text(TINY)
    dialog = shown(qtbot, WatchDialog(script=str(script), nodes="10.0.0.2:29400"))
    combo = dialog.launch_combo
    assert [combo.itemData(i) for i in range(combo.count())] == list(SCRIPT_LAUNCHES)
    for i in range(combo.count()):   # each choice described in the engine's words
        tip = html.unescape(" ".join(combo.itemData(i, QtCore.Qt.ItemDataRole.ToolTipRole).split()))
        assert SCRIPT_LAUNCHES[combo.itemData(i)] in tip, tip
    assert dialog.launch() == "torchrun"   # the command line's default
    assert dialog.launch_caption.text() == SCRIPT_LAUNCHES["torchrun"]
    assert dialog.config().script_launch == "torchrun" and dialog.config().nodes == "10.0.0.2:29400"
    dialog.nodes.set_nodes(None)
    assert dialog.watch_button.isEnabled(), dialog.problem.text()

    combo.setCurrentIndex(combo.findData("python"))   # as a user picks it
    assert dialog.launch() == "python" and dialog.launch_caption.text() == SCRIPT_LAUNCHES["python"]
    assert dialog.devices.text() == "auto" and "One device" in dialog.devices.toolTip()
    assert not dialog.nodes.isVisible()   # one process on this machine
    dialog.nodes.set_nodes("10.0.0.2:29400")   # kept for torchrun's ranks, not this run's
    config = dialog.config()
    assert (config.script_launch, config.devices, config.nodes, config.script) == ("python", "auto", None,
                                                                                    str(script))
    assert dialog.watch_button.isEnabled(), dialog.problem.text()
    # several ranks are not offered: several devices are refused as the dialog shows any problem
    dialog.devices.setText("cpu:2")
    assert dialog.problem.text().startswith("devices: a script run as plain python is one process")
    assert not dialog.watch_button.isEnabled()
    dialog.devices.setText("cuda:0")   # this machine's GPUs as the window counts them: none here
    assert "devices:" in dialog.problem.text() and not dialog.watch_button.isEnabled()
    dialog.devices.setText("cpu:1")
    assert dialog.watch_button.isEnabled(), dialog.problem.text()
    reopened = shown(qtbot, WatchDialog(**dialog.fields()))   # as Run › Watch a script… opens it next time
    assert reopened.launch() == "python" and reopened.config() == dialog.config()
    with_a_gpu = shown(qtbot, WatchDialog(script=str(script), devices="cuda:0", launch="python", gpus=1))
    assert with_a_gpu.watch_button.isEnabled(), with_a_gpu.problem.text()
    assert with_a_gpu.config().devices == "cuda:0"

    # back to torchrun's ranks: their devices as they were, the nodes again
    dialog.set_launch("torchrun")
    assert dialog.launch() == "torchrun" and dialog.devices.text() == "cpu:2" and dialog.nodes.isVisible()
    assert dialog.launch_caption.text() == SCRIPT_LAUNCHES["torchrun"]
    assert (dialog.config().script_launch, dialog.config().nodes) == ("torchrun", "10.0.0.2:29400")
    # plain python again: its own device as last typed
    dialog.set_launch("python")
    assert dialog.devices.text() == "cpu:1" and dialog.config().script_launch == "python"


def _watch_from_the_menu(qtbot, window, monkeypatch, script, launch):
    """Run › Watch a script… with ``script`` and ``launch`` chosen in the dialog; the run's RunResult."""
    from app.views.watch_dialog import WatchDialog

    def fill_and_accept(dialog):
        dialog.script.setText(str(script))
        dialog.set_launch(launch)
        assert dialog.watch_button.isEnabled(), dialog.problem.text()
        return QtWidgets.QDialog.DialogCode.Accepted
    monkeypatch.setattr(WatchDialog, "exec", fill_and_accept)
    action = next(a for a in window.menuBar().findChildren(QtWidgets.QMenu)
                  for a in a.actions() if a.text() == "Watch a script…")
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        action.trigger()
    return finished.args[0]


def test_a_script_watched_as_plain_python_from_the_dialog_finishes(qtbot, window, monkeypatch, tmp_path):
    """One plain process on one device: no torchrun variables, its steps counted, its output in the Log tab."""
    script = tmp_path / "tiny.py"
    script.write_text(TINY)
    info = _watch_from_the_menu(qtbot, window, monkeypatch, script, "python")
    log = window.log_view.toPlainText()
    assert info.status == "finished", (info, log[-2000:])
    assert info.summary.strategy == "script" and info.summary.model == "tiny.py"
    assert "the script: ranks: none" in log and "the script: tiny done" in log   # as `python tiny.py` runs it
    assert window.plots.progress.steps_done == 4
    assert window.history.run_ids()[0] == info.run_id and window.runs.last_watch["launch"] == "python"
    assert not window.center.error_panel.isVisible()


def test_a_failing_watched_scripts_traceback_is_shown(qtbot, window, monkeypatch, tmp_path):
    """The script's own traceback, its file and line, in the error panel (open, not behind a click) and the Log;
    in the Log each of its two ranks' output (a print, and its logging's line on stderr) under the rank's name, and
    the traceback once, under the rank that raised."""
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    info = _watch_from_the_menu(qtbot, window, monkeypatch, script, "torchrun")
    assert info.status == "failed"
    panel = window.center.error_panel
    qtbot.waitUntil(panel.isVisible, timeout=5_000)
    assert "RuntimeError: the data folder is gone" in panel.message.text(), panel.message.text()
    shown_tb = panel.traceback.toPlainText()
    assert panel.traceback.isVisible() and panel.details_button.isChecked()
    assert "Traceback (most recent call last)" in shown_tb, shown_tb
    assert f'File "{script}", line 10' in shown_tb and "in load_the_data" in shown_tb, shown_tb
    assert "RuntimeError: the data folder is gone" in shown_tb
    log = window.log_view.toPlainText()
    lines = [re.sub(r"^\d\d:\d\d:\d\d  ", "", line) for line in log.splitlines()]   # less each entry's time
    for rank in (0, 1):   # the script's own output, each line under its rank
        assert f"rank {rank}: about to fail" in lines, log[-2000:]
        assert f"rank {rank}: WARNING:root:no checkpoint to resume from" in lines, log[-2000:]
    (error,) = [k for k, line in enumerate(lines) if line.startswith("error (rank ")]
    assert "RuntimeError: the data folder is gone" in lines[error]
    assert lines[error + 1] == "Traceback (most recent call last):"
    assert f'  File "{script}", line 5, in load_the_data' in lines[error + 1:], log[-2000:]
    assert lines.count("RuntimeError: the data folder is gone") == 1   # the traceback's last line, once
    assert window.history.records[0].status == "failed"
