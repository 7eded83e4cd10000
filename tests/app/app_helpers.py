"""Helpers for the app's window tests: set the experiment through the widgets, wait on the window."""
from __future__ import annotations


def shown(qtbot, widget, size: tuple[int, int] | None = None):
    """``widget`` on screen (offscreen), at ``size`` if given, closed with the test; returned."""
    qtbot.addWidget(widget)
    if size is not None:
        widget.resize(*size)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


# A small model that trains in milliseconds a step on two cores (the CI size).
SMALL = dict(width=64, depth=4, batch_size=64, steps=6)


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
    """Wait until validation passed (and the blocks are profiled): Run is enabled and a click starts the run
    at once (Run is clickable while the planner checks too; the run then waits for the check)."""
    def ready():
        assert win.run_action.isEnabled(), f"Run disabled: {win.run_reason.text()!r}"
        assert win.model.plan.check != "pending", "the planner has not checked the configuration yet"
        assert not profiled or win.split_view.blocks, f"no blocks: {win.split_view.summary.text()!r}"
    qtbot.waitUntil(ready, timeout=timeout)


def wait_steps(qtbot, win, n: int, timeout: int = 60_000) -> None:
    """Wait until the running run reported ``n`` steps; on a timeout, say what the window shows."""
    def reached():
        assert win.plots.progress.steps_done >= n, (
            f"{win.plots.progress.steps_done} steps; status: {win.status_label.text()!r}; "
            f"log: {win.log_view.toPlainText()[-1500:]}")
    qtbot.waitUntil(reached, timeout=timeout)
