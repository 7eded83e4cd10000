"""A form that cannot surprise (issue 54): the wheel scrolls the form, never an unfocused box under the cursor;
every problem of the settings listed at once, a model file that did not load saying so on its own line; the
descriptions whole at 1280x800; counts of one in the singular."""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app_helpers import shown

BROKEN_MODEL = "import torch\n\n\ndef build_model(:\n    pass\n"


def wheel(widget: QtWidgets.QWidget, steps: int = 1) -> None:
    """A mouse wheel turned ``steps`` notches up over ``widget``'s middle, as Qt delivers it."""
    middle = QtCore.QPointF(widget.rect().center())
    event = QtGui.QWheelEvent(middle, QtCore.QPointF(widget.mapToGlobal(middle.toPoint())), QtCore.QPoint(0, 0),
                              QtCore.QPoint(0, 120 * steps), QtCore.Qt.MouseButton.NoButton,
                              QtCore.Qt.KeyboardModifier.NoModifier, QtCore.Qt.ScrollPhase.NoScrollPhase, False)
    QtWidgets.QApplication.sendEvent(widget, event)


def test_a_wheel_over_an_unfocused_box_leaves_its_value_and_changes_it_once_focused(qtbot, qapp_configured):
    from app.main_window import MainWindow
    win = shown(qtbot, MainWindow(start_services=False), (1280, 800))
    panel = win.experiment
    steps, strategy = panel.steps_spin, panel.strategy_combo
    before = (steps.value(), strategy.currentIndex())
    assert steps.focusPolicy() == QtCore.Qt.FocusPolicy.StrongFocus and not steps.hasFocus()
    wheel(steps, 3)
    wheel(strategy, -1)
    assert (steps.value(), strategy.currentIndex()) == before   # the form scrolled; nothing changed
    steps.setFocus()
    qtbot.waitUntil(steps.hasFocus, timeout=2_000)
    wheel(steps, 1)
    assert steps.value() == before[0] + 1   # clicked or tabbed to, it is the wheel's
    win.shutdown()


def test_a_form_with_two_errors_lists_both_and_the_model_line_says_the_file_did_not_load(qtbot, window, tmp_path):
    """A model file with a SyntaxError and micro-batches that do not divide the batch: both at once (the file's
    showed only once the batch was mended, and its line read as if it had loaded meanwhile)."""
    broken = tmp_path / "broken_model.py"
    broken.write_text(BROKEN_MODEL)
    panel = window.experiment
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("pipeline"))
    panel.devices_combo.setCurrentText("cpu:2")
    panel.batch_spin.setValue(63)
    panel.mb_mode.setCurrentIndex(panel.mb_mode.findData("micro_batches"))
    panel.mb_spin.setValue(4)
    panel.model_combo.set_model_file(str(broken))

    def both_listed():
        shown = panel.show_problems(window.plans.state.panel_problems())
        assert any("SyntaxError" in text for text in shown), shown
        assert any("does not divide the batch size 63" in text for text in shown), shown
    qtbot.waitUntil(both_listed, timeout=60_000)   # the planner imports torch first: seconds
    problems = [label.text() for label in panel.notices.labels.values() if label.isVisible()]
    assert len(problems) >= 2, problems
    assert "not loaded: " in panel.model_desc.text() and "SyntaxError" in panel.model_desc.text()
    assert "Cannot run:" in window.run_reason.text() and "(and 1 more)" in window.run_reason.text()


def test_descriptions_are_whole_at_1280x800_and_one_is_one(qtbot, qapp_configured):
    from app.main_window import MainWindow
    from app.state.problem_help import explain_all
    from engine.config import ExperimentConfig
    from engine.problems import Problem
    win = shown(qtbot, MainWindow(start_services=False), (1280, 800))
    panel = win.experiment
    for strategy, schedule in (("pipeline", "interleaved1f1b"), ("fsdp", None)):
        panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData(strategy))
        if schedule:
            panel.schedule_combo.setCurrentIndex(panel.schedule_combo.findData(schedule))
        qapp_configured.processEvents()
        for label in (panel.strategy_desc, panel.schedule_desc):
            if label.isVisible():   # as tall as its wrapped lines: none cut at the top or the bottom
                assert label.height() >= label.heightForWidth(label.contentsRect().width()), (strategy, label.text())
    config = ExperimentConfig(strategy="pipeline", devices="cpu:2", stages_per_device=2, schedule="interleaved1f1b")
    (said,) = explain_all([Problem("devices", "4 stages (2 per device) but the model has only 3 blocks; use at "
                                              "most 1 devices")], config)
    assert said.text.endswith("use at most 1 device") and "1 devices" not in said.text
    win.shutdown()
