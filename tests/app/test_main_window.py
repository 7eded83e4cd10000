"""The main window driven as a user would: real planner process, real worker, real store."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets

from engine.events import Launched
from tests.app.app_helpers import set_small_mlp, wait_ready, wait_steps

RUN_TIMEOUT_MS = 60_000


def test_model_parallel_run_from_clicks(qtbot, window):
    assert window.windowTitle() == "Splitscope"
    set_small_mlp(window, strategy="model-parallel")
    wait_ready(qtbot, window)
    view = window.split_view
    assert view.balanced is not None and view.split() == view.balanced  # preselected
    # Choose a split other than the balanced one: tick block 1, untick the balanced point.
    (balanced,) = view.balanced
    other = 1 if balanced != 1 else 3
    view.table.item(other, 0).setCheckState(QtCore.Qt.CheckState.Checked)
    view.table.item(balanced, 0).setCheckState(QtCore.Qt.CheckState.Unchecked)
    assert view.split() == (other,)
    wait_ready(qtbot, window)

    # Between Run and the first step the status line, the run box and the timeline say what the run does
    # (read once the window handled the worker's `launched`: connected after it).
    starting = []
    window.worker.sigEvents.connect(lambda events: not starting and any(isinstance(e, Launched) for e in events)
                                    and starting.append((window.status_label.text(), window.progress_bar.format(),
                                                         window.plots.timeline.placeholder.toPlainText())))
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.run_button, QtCore.Qt.MouseButton.LeftButton)
        assert window.status_label.text() == ("model-parallel on cpu:2 · starting: launching the worker (the first "
                                              "run after start takes longer)…")
        qtbot.waitUntil(lambda: window.worker.is_running(), timeout=5_000)
        assert not window.run_action.isEnabled() and window.stop_action.isEnabled()
    info = finished.args[0]
    assert info.status == "finished", info
    assert info.summary.split == [other]
    built = "starting: the ranks build the model and meet…"
    assert starting == [(f"model-parallel on cpu:2 · {built}", built, built)], starting

    plots = window.plots
    assert plots.series_plots["throughput"].point_count() == 6
    assert plots.series_plots["loss"].point_count() == 6
    # Efficiency: each device's MFU from the step its FLOPs were counted (the second) on, in (0, 100] %.
    efficiency = plots.series_plots["efficiency"]
    assert set(efficiency.series_keys()) == {"cpu:0", "cpu:1"} and efficiency.point_count() == 2 * 5
    assert efficiency.legend.isVisible()
    mfu = [e.mfu for e in info.summary.efficiency.devices]
    assert all(0 < share <= 1 for share in mfu), mfu
    # The run's devices' telemetry: utilization per core (the idle view's series), memory per process.
    assert {"core 0", "core 1"} <= set(plots.series_plots["utilization"].series_keys())
    assert {"cpu:0", "cpu:1"} <= set(plots.series_plots["memory"].series_keys())
    assert {r[1] for r in plots.timeline.rows} == {"cpu:0", "cpu:1"}
    assert plots.bubble.measured.text() not in ("", "—")
    assert window.progress_bar.value() == window.progress_bar.maximum() == 6
    assert "Finished" in window.status_label.text()
    assert window.run_action.isEnabled()
    # The Memory tab, drawn when it comes into view: each stage holds its own blocks' parameters.
    window.center_tabs.setCurrentWidget(window.center.memory_view)
    memory = window.center.memory_view.memory_plot.segment_heights
    assert set(memory) == {"params", "grads", "optimizer", "activations"}
    assert all(v > 0 for v in memory["params"]) and len(memory["params"]) == 2
    sent = window.center.memory_view.comm_plot.segment_heights   # the activation forward, its gradient back
    assert set(sent) == {"send", "recv"} and all(v > 0 for v in sent["send"] + sent["recv"])
    window.center_tabs.setCurrentWidget(plots)

    # The history lists the run; selecting it shows its stored plots.
    assert window.history.run_ids()[0] == info.run_id
    with qtbot.waitSignal(window.sigHistoryShown, timeout=10_000) as shown:
        window.history.table.selectRow(0)
    assert shown.args[0] == [info.run_id]
    assert plots.mode == "history"
    assert plots.series_plots["throughput"].point_count() == 6
    assert plots.series_plots["utilization"].point_count() > 0
    assert plots.series_plots["efficiency"].point_count() == 2 * 6   # the stored run's: every step from its count
    window.back_to_live()
    assert plots.mode == "live"


@pytest.mark.solo   # compares figures that load moves: `make test` runs it alone
def test_naive_split_utilization_reads_one_half_on_its_smoothed_line(qtbot, window):
    """A core's 10 ms ticks make its raw samples swing 0-100 % at 10 Hz; the one-second mean shows the half
    that the timeline proves, and each core is one legend entry: "core 0 · cpu:0", not "core 0" and "cpu:0"."""
    set_small_mlp(window, strategy="model-parallel", width=512, depth=8, batch_size=2048, steps=30)
    wait_ready(qtbot, window)
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as done:
        window.run_action.trigger()
        # From the first measured step: the two warm-up steps (and a rank's first moments in its process)
        # do more than a step's work, which the OS counts on the core.
        wait_steps(qtbot, window, 3)
        first_step = window.plots.now()
        wait_steps(qtbot, window, 27)
        last_step = window.plots.now()
        # A core's total beside its device's own work, where others ran there too (the window itself: this
        # machine has two cores), is an entry of its own.
        legend = sorted(n for n in window.plots.series_plots["utilization"].legend_names()
                        if not n.endswith("core total (all programs)"))
    assert legend == ["core 0 · cpu:0", "core 1 · cpu:1"]  # while the run goes; "core 0" alone after it
    busy = dict(zip(done.args[0].summary.devices, done.args[0].summary.devices_busy, strict=True))
    plot = window.plots.series_plots["utilization"]
    for core, device in (("core 0", "cpu:0"), ("core 1", "cpu:1")):
        x, smooth = plot.series_data(core)
        raw = plot.series_data("raw " + core)[1]
        shown = smooth[(x >= first_step + 1.0) & (x <= last_step)]
        # a point per sample at the window's rate (a fast machine's steps span fewer seconds than a slow one's)
        expected = window.telemetry_hz * (last_step - first_step - 1.0)
        assert len(shown) >= max(10, 0.8 * expected), (core, len(shown), expected)
        assert raw.max() - raw.min() > shown.max() - shown.min()  # the raw samples swing wider
        # The line is the rank's own work on the core; the core's total counts it and whatever else ran there
        # (the window's own drawing, a busy machine's other work): never much less than the half the engine
        # timed, and never less than the rank's own. The figures themselves are `make bench`'s.
        total = window.telemetry.core[core]
        tx, ty = total.column(0), total.column(1)
        in_run = (tx >= first_step + 1.0) & (tx <= last_step)
        assert np.median(ty[in_run]) >= 100 * busy[device] - 10, (core, busy, ty[in_run].round(1).tolist())
        own = raw[(x >= first_step + 1.0) & (x <= last_step)]
        assert own.mean() <= ty[in_run].mean() + 2, (core, own.mean(), ty[in_run].mean())


def test_the_tutorial_split_of_a_resnet_is_one_click_before_its_blocks_are_timed(qtbot, window):
    """resnet50 on cpu:2: "Tutorial split" starts stage 1 at layer3, by the block names the check gives before
    the blocks are timed; the timing then stops and the run trains with that split at once, its batches drawn
    inside the step when the box says so. Timed after all, the blocks keep the split the user chose. A timing
    skipped leaves an even split by the blocks' count (so a run's rank 0 does not time them either)."""
    e = window.experiment
    e.model_combo.setCurrentIndex(e.model_combo.findData("resnet50"))
    e.devices_combo.setCurrentText("cpu:2")
    e.strategy_combo.setCurrentIndex(e.strategy_combo.findData("model-parallel"))
    e.batch_spin.setValue(4)
    e.steps_spin.setValue(2)
    e.input_combo.setCurrentIndex(e.input_combo.findData("in-step"))
    view = window.split_view

    def named_not_timed():
        return bool(view.names) and not view.blocks and view.profile_button.isVisible()
    # The check answers before the timing starts: the names are there, the blocks' times not yet.
    qtbot.waitUntil(named_not_timed, timeout=30_000)
    assert view.profile_button.text() == "Skip" and not window.run_action.isEnabled()
    assert not view.tutorial_button.isHidden() and view.tutorial_button.isEnabled()
    qtbot.mouseClick(view.tutorial_button, QtCore.Qt.MouseButton.LeftButton)
    assert view.split() == (8,) and view.names[8] == "layer3.0" and "layer3.0" in view.stage_text.text()
    assert not view.tutorial_button.isEnabled()  # already chosen
    assert view.profile_button.text() == "Time blocks" and "skipped" in view.summary.text()
    wait_ready(qtbot, window, profiled=False)
    assert not view.blocks
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        window.run_action.trigger()
    info = finished.args[0]
    assert info.status == "finished", info
    assert info.summary.split == [8]
    assert window.history.records[0].config.input_prep == "in-step"
    # Timed after all: Run waits for the blocks' times, and the split chosen by name stays.
    qtbot.mouseClick(view.profile_button, QtCore.Qt.MouseButton.LeftButton)
    # Asked again: a click on Run now would wait for the check and then the blocks' times (run_rules.py).
    assert window.model.plan.check in ("pending", "profiling")
    wait_ready(qtbot, window, timeout=120_000)
    assert view.split() == (8,) and view.blocks[8].name == "layer3.0" and view.profile_button.isHidden()
    # Another model's timing skipped: an even split by its blocks' count, and Run need not wait.
    e.model_combo.setCurrentIndex(e.model_combo.findData("resnet18"))
    qtbot.waitUntil(named_not_timed, timeout=30_000)
    qtbot.mouseClick(view.profile_button, QtCore.Qt.MouseButton.LeftButton)
    assert view.split() == (round(len(view.names) / 2),) and view.profile_button.text() == "Time blocks"
    wait_ready(qtbot, window, profiled=False)
    # A model without the tutorial's split has no such button.
    e.model_combo.setCurrentIndex(e.model_combo.findData("mlp"))
    assert view.tutorial_button.isHidden()


def test_stop_a_run_midway(qtbot, window):
    set_small_mlp(window, strategy="model-parallel", steps=100_000)
    wait_ready(qtbot, window)
    qtbot.keyClick(window, QtCore.Qt.Key.Key_R, QtCore.Qt.KeyboardModifier.ControlModifier)  # Ctrl+R runs
    wait_steps(qtbot, window, 3)
    assert window.time_left.text().endswith("left")
    with qtbot.waitSignal(window.sigRunFinished, timeout=15_000) as finished:
        qtbot.keyClick(window, QtCore.Qt.Key.Key_Escape)  # Esc stops
    assert finished.args[0].status == "stopped"
    assert "Stopped" in window.status_label.text()
    assert window.history.records[0].status == "stopped"
    assert window.run_action.isEnabled() and not window.stop_action.isEnabled()


BROKEN_SYNTAX = "def build_model(:\n    pass\n"
FAILS_AT_STEP = '''
import sys
import torch
from torch import nn

def build_model():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

calls = 0

def make_batch(batch_size, generator):
    # The app's planner (which profiles the blocks) gets good data; a training
    # process gets one good batch, then the data breaks.
    global calls
    calls += 1
    if calls > 1 and "planner_service" not in sys.argv[0]:
        raise RuntimeError("the data loader broke at step 2")
    return torch.randn(batch_size, 8, generator=generator), torch.randint(0, 2, (batch_size,), generator=generator)
'''


def open_model_file(qtbot, window, monkeypatch, path: Path) -> None:
    """Pick "Open model file..." in the model box; the file dialog answers with ``path``."""
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", lambda *a, **k: (str(path), "*.py"))
    combo = window.experiment.model_combo
    index = combo.findData("__open_model_file__")
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def test_broken_model_file_shows_its_error_and_a_failing_run_its_traceback(qtbot, window, monkeypatch, tmp_path):
    broken = tmp_path / "broken_model.py"
    broken.write_text(BROKEN_SYNTAX)
    set_small_mlp(window, strategy="single", devices="cpu:1")
    with qtbot.waitSignal(window.sigChecked, timeout=30_000,
                          check_params_cb=lambda problems: any(p.option == "model_file" for p in problems)):
        open_model_file(qtbot, window, monkeypatch, broken)
    label = window.experiment.problems["model"]
    assert label.isVisible()
    assert "broken_model.py" in label.text() and "SyntaxError" in label.text()
    assert not window.run_action.isEnabled()
    # Why Run is held back, in the app's words (app/state/problem_help.py) naming the file.
    assert window.run_reason.text().startswith("Cannot run: ") and "broken_model.py" in window.run_reason.text()

    # A file that loads but fails during the run: the error and traceback show, the app stays usable.
    failing = tmp_path / "failing_model.py"
    failing.write_text(FAILS_AT_STEP)
    open_model_file(qtbot, window, monkeypatch, failing)
    qtbot.waitUntil(lambda: window.run_action.isEnabled(), timeout=30_000)
    assert not label.isVisible()
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        window.run_action.trigger()
    assert finished.args[0].status == "failed"
    panel = window.center.error_panel
    assert panel.isVisible()
    assert "data loader broke" in panel.message.text()
    assert "RuntimeError" in panel.traceback.toPlainText()
    assert window.history.records[0].status == "failed"
    # Usable: the next run can start, once a check the planner may still owe (the file's blocks profiled
    # while the run went) is in.
    qtbot.waitUntil(lambda: window.run_action.isEnabled(), timeout=30_000)


def test_closing_during_a_run_asks_then_stops_cleanly(qtbot, window, monkeypatch):
    asked = []

    def answer(*args, **kwargs):
        asked.append(args[2] if len(args) > 2 else "")
        return QtWidgets.QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QtWidgets.QMessageBox, "question", answer)
    set_small_mlp(window, strategy="model-parallel", steps=100_000)
    wait_ready(qtbot, window)
    window.run_action.trigger()
    wait_steps(qtbot, window, 1)
    with qtbot.waitSignal(window.sigRunFinished, timeout=15_000) as finished:
        window.close()
    assert asked and "run is in progress" in asked[0]
    assert finished.args[0].status == "stopped"
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5_000)
    assert window._closed


def test_run_clicked_before_the_check_waits_for_it_and_esc_cancels_it(qtbot, window, monkeypatch, tmp_path):
    """Run can be clicked while the planner checks (at start-up its torch import takes seconds): the run waits
    for the check and starts once it passes; Esc cancels it before it starts; a check that finds problems
    starts nothing."""
    set_small_mlp(window, strategy="single", devices="cpu:1", steps=3)
    wait_ready(qtbot, window, profiled=False)
    runs_before = window.runs.runs_begun

    def click_run_before_the_check():
        assert window.model.plan.check == "pending" and window.run_action.isEnabled()
        window.run_action.trigger()
        assert window.model.activity.waiting_check and not window.worker.is_running()
        assert window.run_reason.text() == "Run starts once the configuration is checked (Esc cancels)."
        assert not window.run_action.isEnabled() and window.stop_action.isEnabled()

    window.experiment.steps_spin.setValue(4)   # the change asks the planner again
    click_run_before_the_check()
    window.stop_action.trigger()
    assert not window.model.activity.waiting_check and "cancelled" in window.status_label.text()
    qtbot.waitUntil(lambda: window.model.plan.check == "ok", timeout=30_000)
    qtbot.wait(200)
    assert window.runs.runs_begun == runs_before and not window.worker.is_running()

    # A model file that does not load: only the planner finds it (the form's own check passes).
    broken = tmp_path / "broken_model.py"
    broken.write_text(BROKEN_SYNTAX)
    open_model_file(qtbot, window, monkeypatch, broken)
    click_run_before_the_check()
    qtbot.waitUntil(lambda: window.model.plan.check == "problems", timeout=30_000)
    assert window.status_label.text().startswith("Run not started: Cannot run") and "broken_model.py" in \
        window.status_label.text()
    assert window.runs.runs_begun == runs_before and not window.model.activity.waiting_check

    set_small_mlp(window, strategy="single", devices="cpu:1", steps=4)
    with qtbot.waitSignal(window.sigRunFinished, timeout=RUN_TIMEOUT_MS) as finished:
        click_run_before_the_check()
    assert finished.args[0].status == "finished" and window.runs.runs_begun == runs_before + 1
    assert window.plots.series_plots["loss"].point_count() == 4
