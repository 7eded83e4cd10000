"""Advise in the app (issue 56 item 2): the Advise action beside Run, the candidates ranked in the Advise tab with
their predicted and measured steps, "Use this" filling the form with one, the progress while advise probes and
checks, and Stop ending advise and its runs.

The table's tests feed a recorded ``main.py advise --json`` answer (tests/data/advise/seed_toy_cpu2.json:
``--model seed-toy --devices cpu:2 --batch-size 64 --budget-s 8``, as the app asks it) through the path the
child's answer takes (app/services/advise_client.py ``answer_of``); two tests run advise for real from the
window, on the ToyModel, small enough that its probe and checks take seconds.
"""
from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from PySide6 import QtCore, QtWidgets

from app.services.advise_client import answer_of
from app.state.advise_rows import failure_of, ms_text, progress_of, run_config
from engine.advise.answer import read_advice
from engine.advise.command import advice_json
from procs import tagged_processes
from tests.app.app_helpers import wait_ready

RECORDED = Path(__file__).resolve().parent.parent / "data" / "advise" / "seed_toy_cpu2.json"
ADVISE_TIMEOUT_MS = 240_000   # a probe and three checks of the ToyModel: 20-40 s here, more on a loaded machine
STOP_TIMEOUT_MS = 20_000      # a stop is honoured within seconds (the checking run's worker promises 3)


def set_seed_toy(win, strategy: str = "model-parallel", batch_size: int = 64) -> None:
    """The ToyModel on cpu:2, through the panel's widgets, as a user would."""
    e = win.experiment
    e.model_combo.setCurrentIndex(e.model_combo.findData("seed-toy"))
    e.devices_combo.setCurrentText("cpu:2")
    e.strategy_combo.setCurrentIndex(e.strategy_combo.findData(strategy))
    e.batch_spin.setValue(batch_size)
    e.steps_spin.setValue(6)


def click_use(qtbot, win, row: int) -> None:
    button = win.advise.view.table.cellWidget(row, win.advise.view.table.columnCount() - 1)
    assert button.isEnabled(), button.toolTip()
    qtbot.mouseClick(button, QtCore.Qt.MouseButton.LeftButton)


@pytest.mark.quick
def test_the_answer_reads_back_as_advise_wrote_it():
    recorded = json.loads(RECORDED.read_text())
    advice = read_advice(recorded)
    assert advice is not None and advice_json(advice) == recorded
    assert advice.choice in advice.candidates and advice.batch_size == 64
    assert read_advice({"choice": None, "candidates": []}) is None and read_advice([]) is None
    # What the child says of itself: its stages on the bar (a busy bar while it probes), its bad input in a line.
    assert progress_of("advise: probing seed-toy and cpu:2 ...") == (0, 0, "Advise: probing seed-toy and cpu:2")
    assert progress_of("advise: 30 candidates predicted; checking the best 3 within 60 s")[:2] == (0, 3)
    assert progress_of("advise: check 2 of 3: ddp, 12 steps") == (1, 3, "Advise: check 2 of 3: ddp, 12 steps")
    assert progress_of("a warning of torch's") is None
    assert failure_of(["advise: probing", "error: --batch-size: a batch of 1 cannot be spread"], 2) == \
        "--batch-size: a batch of 1 cannot be spread"
    assert answer_of("", -15, True, ["advise: probing"])[:2] == (None, "stopped")


def test_advise_is_beside_run_and_enabled_with_a_valid_form(qtbot, window):
    set_seed_toy(window)
    wait_ready(qtbot, window)
    assert window.advise_action.isEnabled(), window.run_reason.text()
    # Beside Run in the run box, between Run and Stop, and after Run in the Run menu, with its shortcut.
    button = window.run_box.findChild(QtWidgets.QToolButton, "adviseButton")
    assert button.defaultAction() is window.advise_action and button.isEnabled()
    assert window.run_button.geometry().right() < button.geometry().left() < window.stop_button.geometry().left()
    assert button.geometry().top() == window.run_button.geometry().top()
    run_menu = next(m for m in window.menuBar().findChildren(QtWidgets.QMenu) if m.title() == "&Run")
    texts = [a.text() for a in run_menu.actions()]
    assert texts[:3] == ["Run", "Advise", "Stop"], texts
    assert window.advise_action.shortcut().toString() == "Ctrl+Shift+A"
    # A form with a problem runs nothing: Advise waits with Run.
    e = window.experiment
    e.strategy_combo.setCurrentIndex(e.strategy_combo.findData("pipeline"))
    e.mb_mode.setCurrentIndex(e.mb_mode.findData("micro_batches"))
    e.mb_spin.setValue(3)   # does not divide the batch of 64
    qtbot.waitUntil(lambda: not window.run_action.isEnabled() and "Cannot run" in window.run_reason.text(),
                    timeout=30_000)
    assert not window.advise_action.isEnabled()


def test_a_recorded_answer_is_ranked_and_use_this_fills_the_form(qtbot, window):
    recorded = json.loads(RECORDED.read_text())
    set_seed_toy(window, strategy="ddp", batch_size=32)   # not what was advised: Use this must change it
    wait_ready(qtbot, window)
    advice, status, why = answer_of(RECORDED.read_text(), 0, False, [])
    assert status == "finished" and advice is not None, why
    window.advise.show_answer(advice, status, why)

    view = window.advise.view
    table = view.table
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers[:6] == ["#", "candidate", "predicted", "measured", "error", "fits"]
    candidates = recorded["candidates"]
    assert table.rowCount() == len(candidates) and not table.isHidden()
    for row, candidate in enumerate(candidates):
        cells = [table.item(row, c).text() for c in range(table.columnCount() - 1)]
        assert cells[0] == str(row + 1)
        assert cells[1].startswith(candidate["label"])
        assert cells[2] == ms_text(candidate["predicted_step_s"])
        assert bool(cells[3]) is (candidate["measured_step_s"] is not None or candidate["check_error"] is not None)
        assert bool(cells[4]) is (candidate["prediction_error"] is not None)
        assert cells[5] == ("yes" if candidate["fits"] else "no")
        assert cells[6] == candidate["why"]
    choice = next(row for row, c in enumerate(candidates) if c["label"] == recorded["choice"]["label"])
    assert table.item(choice, 1).text() == recorded["choice"]["label"] + " · choice"
    assert table.item(choice, 3).text().startswith(ms_text(recorded["measured_step_s"]))
    assert recorded["choice"]["label"] in view.caption.text()
    assert window.run_box.progress_bar.format().startswith("Advise finished: " + recorded["choice"]["label"])

    # The choice's "Use this": the form holds its run_args, as `main.py run` reads them.
    click_use(qtbot, window, choice)
    wait_ready(qtbot, window)   # the form checked, its blocks timed again where the batch changed: the split stays
    advised, _tokens = run_config(recorded["run_args"])
    form = window.current_config()
    for option in ("model", "devices", "batch_size", "strategy"):
        assert getattr(form, option) == getattr(advised, option), option
    chosen = recorded["choice"]
    assert window.split_view.split() == (tuple(chosen["split"]) if chosen["split"] else None)
    if chosen["strategy"] == "pipeline":
        assert (form.schedule, form.micro_batches) == (chosen["schedule"], chosen["micro_batches"])

    # Another row's: its own strategy, devices and split, the same model and batch.
    other = next(row for row, c in enumerate(candidates)
                 if c["fits"] and c["strategy"] != chosen["strategy"] and c["split"])
    click_use(qtbot, window, other)
    wait_ready(qtbot, window)
    form, candidate = window.current_config(), candidates[other]
    assert (form.strategy, form.devices, form.batch_size) == (candidate["strategy"], candidate["devices"], 64)
    assert window.split_view.split() == tuple(candidate["split"])
    if candidate["strategy"] == "pipeline":
        assert (form.schedule, form.micro_batches) == (candidate["schedule"], candidate["micro_batches"])


def _new_tagged(before: set[int]) -> list[psutil.Process]:
    return [p for p in tagged_processes() if p.pid not in before]


def test_advise_from_the_window_shows_its_progress_and_ranks_what_it_checked(qtbot, window):
    set_seed_toy(window)
    wait_ready(qtbot, window)
    window.advise.budget_s = 8
    progress: list[tuple[str, str]] = []
    window.advise.client.sigProgress.connect(
        lambda line: progress.append((line, window.run_box.progress_bar.format())))
    with qtbot.waitSignal(window.advise.sigEnded, timeout=ADVISE_TIMEOUT_MS) as ended:
        window.advise_action.trigger()
        # One thing at a time on the devices: Run and the form wait, Stop stops advise.
        assert window.advise.is_running() and window.stop_action.isEnabled()
        assert not window.run_action.isEnabled() and not window.advise_action.isEnabled()
        assert not window.experiment.isEnabled()
        assert window.center_tabs.currentWidget() is window.advise.view
    advice, status = ended.args
    log = window.log_view.toPlainText()[-3000:]
    assert status == "finished" and advice is not None, log
    # Each stage said as it came, on the run box's bar.
    lines = [line for line, _bar in progress]
    assert any(line.startswith("advise: probing") for line in lines), lines
    assert any(line.startswith("advise: check 1 of") for line in lines), lines
    assert any(bar.startswith("Advise: check 1 of") for _line, bar in progress), progress
    table = window.advise.view.table
    assert table.rowCount() == len(advice.candidates) > 1
    measured = [table.item(row, 3).text() for row in range(table.rowCount())]
    assert any(text.endswith("ms") or " ms ±" in text for text in measured), measured
    # Done: the controls are back.
    qtbot.waitUntil(lambda: window.run_action.isEnabled() and window.advise_action.isEnabled(), timeout=30_000)


def test_stop_ends_advise_and_its_checking_runs(qtbot, window):
    set_seed_toy(window)
    wait_ready(qtbot, window)
    before = {p.pid for p in tagged_processes()}   # the window's own: its planner
    window.advise.budget_s = 60
    lines: list[str] = []
    window.advise.client.sigProgress.connect(lines.append)
    window.advise_action.trigger()
    qtbot.waitUntil(lambda: any(line.startswith("advise: check 1 of") for line in lines),
                    timeout=ADVISE_TIMEOUT_MS)
    assert _new_tagged(before), "advise's processes run"
    with qtbot.waitSignal(window.advise.sigEnded, timeout=STOP_TIMEOUT_MS) as ended:
        window.stop_action.trigger()
        assert window.status_label.text() == "Stopping advise…"
    assert ended.args[1] == "stopped", window.log_view.toPlainText()[-3000:]
    _gone, alive = psutil.wait_procs(_new_tagged(before), timeout=10)
    assert not alive, [" ".join(p.cmdline()[:6]) for p in alive if p.is_running()]
    qtbot.waitUntil(lambda: window.run_action.isEnabled(), timeout=30_000)


def test_stop_during_the_probe_ends_advise_at_once(qtbot, window):
    set_seed_toy(window)
    wait_ready(qtbot, window)
    before = {p.pid for p in tagged_processes()}
    lines: list[str] = []
    window.advise.client.sigProgress.connect(lines.append)
    window.advise_action.trigger()
    qtbot.waitUntil(lambda: any(line.startswith("advise: probing") for line in lines), timeout=60_000)
    with qtbot.waitSignal(window.advise.sigEnded, timeout=STOP_TIMEOUT_MS) as ended:
        window.stop_run()
    assert tuple(ended.args[:2]) == (None, "stopped"), ended.args
    _gone, alive = psutil.wait_procs(_new_tagged(before), timeout=10)
    assert not alive, [" ".join(p.cmdline()[:6]) for p in alive if p.is_running()]
    assert window.advise.view.caption.text() == "Advise stopped: stopped before any candidate was predicted"
