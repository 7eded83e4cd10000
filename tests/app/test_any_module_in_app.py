"""Any module in the app (issue 14): torchvision's searchable list, a model file's submodule tree in the split
view, and a named split chosen from it run for real."""
from __future__ import annotations

from PySide6 import QtCore

from engine.planner.what_if import TRUST, TRUST_DETAIL
from tests.app.app_helpers import wait_ready
from tests.helpers import ROOT

RUN_TIMEOUT_MS = 90_000
TRANSFORMER = str(ROOT / "examples" / "tiny_transformer.py")


def test_a_model_files_submodule_tree_is_listed_and_a_named_split_runs(qtbot, window):
    panel = window.experiment
    panel.model_combo.set_model_file(TRANSFORMER)
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("model-parallel"))
    panel.devices_combo.setCurrentText("cpu:2")
    panel.batch_spin.setValue(32)
    panel.steps_spin.setValue(4)
    assert panel.level_row.isVisibleTo(panel) and not panel.image_row.isVisibleTo(panel)
    wait_ready(qtbot, window, timeout=60_000)
    view = window.split_view
    assert [b.name for b in view.blocks] == ["embed", "layers.0", "layers.1", "layers.2", "layers.3", "norm", "head"]
    cell = view.table.item(3, 1)
    assert cell.text() == "layers.2" and "(Block)" in cell.toolTip()  # its place in the tree, its class
    assert all(b.cost_s > 0 and b.params >= 0 for b in view.blocks)
    # Start the second stage at layers.2, whatever the balanced split chose.
    for row in range(1, len(view.blocks)):
        state = QtCore.Qt.CheckState.Checked if row == 3 else QtCore.Qt.CheckState.Unchecked
        view.table.item(row, 0).setCheckState(state)
    assert view.split() == (3,)
    wait_ready(qtbot, window, timeout=60_000)
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.run_button, QtCore.Qt.MouseButton.LeftButton)
    info = finished.args[0]
    assert info.status == "finished", info
    assert info.summary.split == [3]
    assert {r[1] for r in window.plots.timeline.rows} == {"cpu:0", "cpu:1"}


def test_torchvision_models_are_searched_and_chosen(qtbot, window):
    from app.views.torchvision_picker import TorchvisionPicker
    panel = window.experiment
    picker = TorchvisionPicker(panel)
    qtbot.addWidget(picker)
    # The list as torchvision gives it, read in a child process (forked, as the window has it).
    picker.load(panel.model_combo.start_torchvision_list)
    qtbot.waitUntil(lambda: picker.list.count() > 50, timeout=60_000)
    picker.search.setText("vit b_16")
    visible = [picker.list.item(i) for i in range(picker.list.count()) if not picker.list.item(i).isHidden()]
    assert [item.data(QtCore.Qt.ItemDataRole.UserRole) for item in visible] == ["torchvision:vit_b_16"]
    assert picker.chosen() == "torchvision:vit_b_16"
    picker.search.setText("mobilenet_v3_small")
    assert picker.chosen() == "torchvision:mobilenet_v3_small"
    QtCore.QTimer.singleShot(0, picker.accept)
    panel.model_combo.pick_torchvision_model(picker)
    panel.image_spin.setValue(32)
    panel.level_combo.setCurrentIndex(panel.level_combo.findData(2))
    config = panel.config()
    assert (config.model, config.image_size, config.split_level) == ("torchvision:mobilenet_v3_small", 32, 2)
    assert panel.image_row.isVisibleTo(panel) and panel.model_combo.currentText() == "torchvision: mobilenet_v3_small"
    # The engine's check takes it: the split view fills with mobilenet's submodules, one level deeper.
    wait_ready(qtbot, window, timeout=60_000)
    assert "features.0" in [b.name for b in window.split_view.blocks]
    # Back to the children: the split view's rows follow the level (the profile is of level and size too).
    panel.level_combo.setCurrentIndex(panel.level_combo.findData(1))
    qtbot.waitUntil(lambda: [b.name for b in window.split_view.blocks][:1] == ["features"], timeout=60_000)


def test_a_schedule_with_stages_per_device_cuts_devices_times_v_stages(qtbot, window):
    from tests.app.app_helpers import set_small_mlp
    panel = window.experiment
    set_small_mlp(window, strategy="pipeline", micro_batches=4)
    assert not panel.per_device_spin.isVisibleTo(panel)  # gpipe: one stage per device
    panel.schedule_combo.setCurrentIndex(panel.schedule_combo.findData("interleaved1f1b"))
    assert panel.per_device_spin.isVisibleTo(panel) and panel.per_device_spin.value() == 2
    assert panel.config().stages_per_device == 2
    wait_ready(qtbot, window, timeout=60_000)
    view = window.split_view
    assert view.stages == 4 and view.balanced is not None and len(view.balanced) == 3
    assert view.split() == view.balanced
    panel.schedule_combo.setCurrentIndex(panel.schedule_combo.findData("zbv"))
    assert panel.config().stages_per_device == 2 and panel.config().schedule == "zbv"
    panel.schedule_combo.setCurrentIndex(panel.schedule_combo.findData("1f1b"))
    assert not panel.per_device_spin.isVisibleTo(panel) and panel.config().stages_per_device is None


def test_the_plan_tab_draws_the_schedules_action_list(qtbot, window):
    """DualPipeV's plan as torch gave it for cpu:2 and 4 micro-batches (an overlapped pair shares its tick)."""
    plan = [["0F0", "0F1", "3F0", "3I0", "3W0", "(0F2;3B1)OVERLAP_F_B", "", "0REDUCE_GRAD"],
            ["1F0", "2F0", "1F1", "2B0", "1B0"]]
    window.plan_view.show_plan(plan, ["cpu:0", "cpu:1"], "dualpipev")
    view = window.plan_view
    assert len(view.cells) == 12 and len(view.labels) == 12  # every compute action, none of the bookkeeping
    # cpu:0 holds stages 0 and 3 (a V): its labels name the stage, as torch writes the actions
    assert [label.toPlainText() for label in view.labels][:6] == ["0F0", "0F1", "3F0", "3I0", "3W0", "0F2"]
    overlapped = [c for c in view.cells if 5 <= c[1] < 6]
    assert [(c[1], c[2]) for c in overlapped] == [(5, 5.5), (5.5, 6)]
    assert "dualpipev schedule's plan" in view.caption.text() and "8 ticks" in view.caption.text()
    window.plan_view.show_plan(None, ["cpu:0"], None)
    assert not view.cells and "No plan" in view.caption.text()


def test_a_what_if_row_runs_its_schedule_for_real(qtbot, window):
    """A pipeline run fills the Plan tab's what-if table (computed in a child, as torch's schedules need); a
    row's Run starts that schedule, stages per device and micro-batch count, once the panel's config is
    checked."""
    from tests.app.app_helpers import set_small_mlp
    set_small_mlp(window, strategy="pipeline", micro_batches=4)
    wait_ready(qtbot, window, timeout=60_000)
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(window.run_button, QtCore.Qt.MouseButton.LeftButton)
    table = window.plan_view.what_if
    assert table.rowCount() == 0 and window.what_if.pending   # asked for once the Plan tab shows
    window.center_tabs.setCurrentWidget(window.plan_view)
    qtbot.waitUntil(lambda: table.rowCount() > 0, timeout=60_000)
    rows = {tuple(table.item(r, c).text() for c in range(3)): r for r in range(table.rowCount())}
    assert ("gpipe", "1", "4") in rows and ("1f1b", "1", "2") in rows and ("zbv", "2", "4") in rows
    button = table.columnCount() - 1
    assert not table.cellWidget(rows[("gpipe", "1", "4")], button).isEnabled()   # the run itself: measured
    caption = window.plan_view.what_if_caption   # how far to trust it: a line, in full on hover
    source = window.history.newest_run_id()
    assert caption.text().startswith(f"What-if of run {source}: {TRUST}")
    assert caption.toolTip().startswith(f"What-if: {TRUST_DETAIL}")
    # and what the predictions took from the run's probes, measured after its last step
    assert "Measured after the run: a backward split into input and weight gradient costs cpu:0" in caption.toolTip()
    assert "Measured after the run: two devices sending hand-overs to each other at once" in caption.toolTip()
    assert window.plan_view.cells  # and its plan, under the last step as measured, each action named by it
    measured = {(c[0], c[3], c[5]) for c in window.plan_view.measured_cells}
    assert {("cpu:0", "forward", 3), ("cpu:1", "backward", 0)} <= measured and not window.plan_view.measured.isHidden()
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        table.cellWidget(rows[("interleaved1f1b", "2", "2")], button).click()
    summary = finished.args[0].summary
    assert (summary.schedule, summary.micro_batches, len(summary.split)) == ("interleaved1f1b", 2, 3)
    # the table it came from stays, the row's run measured beside its prediction, with the error's sign
    row = rows[("interleaved1f1b", "2", "2")]
    assert table.item(row, 4).text() == f"{summary.step_time_s.mean * 1e3:.1f} ms"
    assert table.item(row, 5).text()[0] in "+-" and caption.text().startswith(f"What-if of run {source}")
