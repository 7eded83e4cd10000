"""The experiment panel, the split view and the error panel on their own: words that mean one thing, errors
that offer their fix and leave the form where it is, nothing changed behind the user's back. No window, no
planner, no run."""
from __future__ import annotations

import pytest
from PySide6 import QtCore

from app.state.problem_help import explain_all
from app_helpers import shown
from engine.devices import Device
from engine.events import Started
from engine.planner.planning import BlockInfo
from engine.problems import Problem
from engine.results import Step

LEFT = QtCore.Qt.MouseButton.LeftButton


@pytest.fixture
def panel(qtbot, qapp_configured):
    from app.views.experiment_panel import ExperimentPanel
    view = ExperimentPanel(cores=2)
    qtbot.addWidget(view)
    view.resize(380, view.sizeHint().height())
    view.show()
    qtbot.waitExposed(view)
    return view


@pytest.fixture
def split_view(qtbot, qapp_configured):
    from app.views.split_view import SplitView
    return shown(qtbot, SplitView(), (380, 420))


def blocks(names):
    return [BlockInfo(name, params=4160, cost_s=0.001 * (1 + i), out_bytes=256) for i, name in enumerate(names)]


def buttons_named(widget, text):
    from PySide6 import QtWidgets
    return [b for b in widget.findChildren(QtWidgets.QPushButton) if b.text() == text and b.isVisible()]


# -- one name per thing ---------------------------------------------------------------------------

def test_the_devices_box_names_the_devices_a_run_will_have_and_keeps_the_spec(panel):
    box = panel.devices_combo
    assert box.currentText() == "2 CPU devices (cpu:0, cpu:1)" and panel.config().devices == "cpu:2"
    box.setCurrentText("cpu:1")                    # a spec sets its choice
    assert box.currentText() == "1 CPU device (cpu:0)" and panel.config().devices == "cpu:1"
    box.setEditText("cuda:0,cuda:2")               # a typed spec is taken as it is
    assert panel.config().devices == "cuda:0,cuda:2"


def test_more_cpu_devices_than_cores_are_allowed_with_a_warning_of_what_it_does_to_the_figures(panel):
    assert not panel.notices.warning.isVisible()
    panel.devices_combo.set_spec("cpu:4")
    assert panel.devices_combo.currentText().endswith("sharing 2 cores")
    warning = panel.notices.warning
    assert warning.isVisible() and warning.text().startswith("4 CPU devices on 2 cores: devices share cores")
    assert "utilization reads per core" in warning.text()
    panel.devices_combo.set_spec("cpu:2")
    assert not warning.isVisible()


# -- nothing changes silently -----------------------------------------------------------------------

def test_switching_models_keeps_the_batch_size_and_offers_the_models_own(qtbot, panel):
    panel.batch_spin.setValue(512)
    panel.model_combo.setCurrentIndex(panel.model_combo.findData("resnet50"))
    assert panel.batch_spin.value() == 512                        # kept, not 120
    assert panel.batch_hint.label.text() == "suggested: 120 (the tutorial's)"
    assert panel.batch_hint.button.isVisible() and panel.batch_hint.button.text() == "Use 120"
    with qtbot.waitSignal(panel.sigConfigChanged):
        qtbot.mouseClick(panel.batch_hint.button, LEFT)
    assert panel.config().batch_size == 120
    assert not panel.batch_hint.button.isVisible() and "(the tutorial's)" in panel.batch_hint.label.text()
    panel.model_combo.setCurrentIndex(panel.model_combo.findData("mlp"))
    assert panel.batch_spin.value() == 120 and panel.batch_hint.label.text() == "suggested: 2048 (sized for CPU devices)"


# -- errors that help ---------------------------------------------------------------------------------

def single_on_two_devices(panel) -> list[dict]:
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("single"))
    return explain_all([Problem("devices", "single uses exactly one device, got 2 (cpu:0, cpu:1)")],
                       panel.config())


def test_a_problem_offers_its_fix_and_a_click_applies_it(qtbot, panel):
    shown = panel.show_problems(single_on_two_devices(panel))
    assert shown == ["Single device runs on one device; Devices is set to 2 CPU devices (cpu:0, cpu:1)."]
    assert panel.problems["devices"].isVisible()
    (button,) = buttons_named(panel, "Use 1 device")
    with qtbot.waitSignal(panel.sigConfigChanged):
        qtbot.mouseClick(button, LEFT)
    assert panel.config().devices == "cpu:1"
    assert panel.devices_combo.currentText() == "1 CPU device (cpu:0)"


def test_the_form_does_not_move_when_problems_come_and_go(qtbot, panel):
    fields = (panel.model_combo, panel.devices_combo, panel.strategy_combo, panel.mb_spin, panel.batch_spin,
              panel.steps_spin, panel.input_combo, panel.notices)

    def where():
        QtCore.QCoreApplication.processEvents()
        return [w.mapTo(panel, QtCore.QPoint(0, 0)).y() for w in fields] + [panel.sizeHint().height()]

    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("pipeline"))
    before = where()
    problems = [Problem("model", "could not build mlp"),
                Problem("micro_batches", "must divide the batch size 2048; 5 does not"),
                Problem("steps", "must be from 1 to 10000000, got 0")]
    panel.show_problems(explain_all(problems, panel.config(split=None).replace(micro_batches=5)))
    assert panel.problems["micro_batches"].isVisible() and buttons_named(panel, "Use 4 micro-batches")
    assert where() == before
    panel.devices_combo.set_spec("cpu:8")          # the sharing warning too
    assert panel.notices.warning.isVisible()
    assert where() == before
    panel.show_problems([])
    assert where() == before


def test_the_error_header_has_no_backslash_of_repr(qtbot, qapp_configured):
    from app.views.error_panel import ErrorPanel
    errors = ErrorPanel()
    qtbot.addWidget(errors)
    # As a rank's KeyError reached the app (str() of a KeyError is the repr of its message), from a model whose
    # block names hold dots.
    stored = "rank 0 (cpu:0, pid 4374) failed: KeyError: 'module name can\\'t contain \".\", got: layer1.0'"
    errors.show_error(f"Run failed: {stored}", "Traceback (most recent call last): ...")
    assert "\\" not in errors.message.text()
    assert "module name can't contain \".\", got: layer1.0" in errors.message.text()


# -- the split view ----------------------------------------------------------------------------------

def test_a_stage_of_one_block_reads_block_n(split_view):
    split_view.set_context(True, 2, micro_batch_size=64)
    split_view.set_blocks(blocks([f"layer{i}" for i in range(5)]), [4])
    text = split_view.stage_text.text()
    assert "block 4:" in text and "blocks 4–4" not in text and "blocks 0–3" in text


def test_long_block_names_are_shown_cut_in_the_middle_with_the_whole_name_in_the_tooltip(split_view):
    from PySide6 import QtGui
    names = ["stem", *(f"layer{k}.{i}" for k in range(1, 5) for i in range(3)), "head"]
    split_view.set_context(True, 2, micro_batch_size=8)
    split_view.set_blocks(blocks(names), [7])
    table = split_view.table
    assert table.textElideMode() == QtCore.Qt.TextElideMode.ElideMiddle
    item = table.item(7, 1)
    assert item.text() == "layer3.0" and "layer3.0" in item.toolTip() and "block 7" in item.toolTip()
    assert table.verticalHeaderItem(7).text() == "7"            # the index heads the row, not the name's cell
    # The column has room for a name: not elided to "…" at the panel's width.
    assert table.columnWidth(1) >= QtGui.QFontMetrics(table.font()).horizontalAdvance("layer3.0")


def test_a_split_point_too_many_offers_to_keep_one_and_a_click_keeps_it(qtbot, split_view):
    from engine.config import ExperimentConfig
    split_view.set_context(True, 2, micro_batch_size=64)
    split_view.set_blocks(blocks([f"layer{i}" for i in range(5)]), [3])
    table_y = split_view.table.mapTo(split_view, QtCore.QPoint(0, 0)).y()
    with qtbot.waitSignal(split_view.sigSplitChanged):
        split_view.table.item(1, 0).setCheckState(QtCore.Qt.CheckState.Checked)   # a second box
    assert split_view.split() == (1, 3)
    config = ExperimentConfig(strategy="model-parallel", model="mlp", width=64, depth=4, devices="cpu:2",
                              batch_size=64, split=(1, 3))
    split_view.show_problems(explain_all([Problem("split", "2 split point(s) make 3 stages, but "
                                                                        "there are 2 devices")], config))
    assert split_view.problem.isVisible() and "keep 1 split point" in split_view.problem.text()
    QtCore.QCoreApplication.processEvents()
    assert split_view.table.mapTo(split_view, QtCore.QPoint(0, 0)).y() == table_y   # the rows stay put
    (keep,) = buttons_named(split_view, "Keep only split at block 3")
    with qtbot.waitSignal(split_view.sigSplitChanged):
        qtbot.mouseClick(keep, LEFT)
    assert split_view.split() == (3,)


# -- experiments use the panel's settings -------------------------------------------------------------

def test_an_experiment_takes_the_panels_schedule_and_says_what_it_sets_itself(qtbot, panel):
    from app.views.experiments_menu import ExperimentsMenu, preset_base
    from engine.experiments import PRESETS
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("pipeline"))
    panel.schedule_combo.setCurrentIndex(panel.schedule_combo.findData("1f1b"))
    panel.input_combo.setCurrentIndex(panel.input_combo.findData("in-step"))
    base = preset_base(panel.config())
    assert (base.schedule, base.input_prep, base.micro_batches) == ("1f1b", "in-step", 4)
    pipeline = next(p for p in PRESETS["compare-strategies"].points(base) if p.label == "pipeline")
    assert pipeline.config.schedule == "1f1b"
    menu = ExperimentsMenu()
    qtbot.addWidget(menu)
    tip = menu.preset_actions["compare-strategies"].toolTip()
    assert "Sets itself: the strategy, and the devices" in tip and "the rest is the panel's. Command line" in tip


def test_an_option_is_declared_once_and_the_command_line_the_form_and_experiments_follow(qtbot, qapp_configured,
                                                                                         monkeypatch):
    """Throwaway options added to a copy of ExperimentConfig's declaration, and nothing else edited: the
    command line offers them with their help (and bounds) and parses them into the config, the checks refuse a
    value outside the bounds, the panel shows a control for each (under More options, a number box stopping at
    the bounds) whose value lands in the config and survives the settings, and an experiment's base takes
    them. The panel's own boxes stop where the checks do."""
    import argparse
    import dataclasses

    import app.views.experiment_panel as panel_module
    import app.views.form_settings as form_settings
    import engine.config as config_module
    import engine.experiments.presets as presets
    import engine.run_options as run_options
    from app.views.experiment_panel import ExperimentPanel
    from app.views.experiments_menu import preset_base

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithClip(config_module.ExperimentConfig):
        grad_clip: float | None = config_module._option(None, "clip each step's gradient norm at this value",
                                                        group="training", form=True)
        accumulate: int | None = config_module._option(None, "micro-steps each optimizer step accumulates",
                                                       bounds=(1, 16), group="training", form=True)
        clip_by: str = config_module._option("norm", "what --grad-clip bounds", choices={
            "norm": "the gradients' whole norm", "value": "each element"}, group="training", form=True)
    for module in (config_module, run_options, panel_module, form_settings, presets):   # each module naming the class
        monkeypatch.setattr(module, "ExperimentConfig", WithClip)

    parser = argparse.ArgumentParser()
    run_options.add_run_options(parser)
    assert "clip each step's gradient norm" in parser.format_help()
    assert "accumulates; from 1 to 16" in " ".join(parser.format_help().split())
    training = parser.format_help().split("training options:")[1].split(" options:")[0]   # under its concern
    assert "--grad-clip" in training and "--accumulate" in training and "--batch-size" in training
    # its bounds are checked with every other option's, and said as declared
    from engine import rules
    assert [p.message for p in rules.problems(WithClip(accumulate=17))] == ["must be from 1 to 16, got 17"]
    assert rules.problems(WithClip(accumulate=16)) == []
    assert [p.message for p in rules.problems(WithClip(clip_by="sign"))] == [
        "unknown value 'sign'; allowed: norm, value"]
    config, _ = run_options.config_from_args(parser.parse_args(["--grad-clip", "0.5", "--steps", "3"]))
    assert (type(config), config.grad_clip, config.steps, config.warmup) == (WithClip, 0.5, 3, 2)
    empty, _ = run_options.config_from_args(parser.parse_args(["--token-file", "", "--model-file", ""]))
    assert (empty.token_file, empty.model_file, empty.model) == (None, None, "mlp")   # an empty path: none
    experiment = argparse.ArgumentParser()
    run_options.add_run_options(experiment, for_experiment=True)
    assert vars(experiment.parse_args(["--grad-clip", "1"])) == {"grad_clip": 1.0, "telemetry_hz": 10.0,
                                                                  "db": None, "json": False}

    view = ExperimentPanel(cores=2)
    qtbot.addWidget(view)
    assert "grad_clip" in view.more.names and view.config().grad_clip is None
    for spin, option in ((view.width_spin, "width"), (view.depth_spin, "depth"), (view.batch_spin, "batch_size"),
                         (view.steps_spin, "steps")):
        assert (spin.minimum(), spin.maximum()) == config_module.bounds_of(option), option
    accumulate = view.more.controls["accumulate"]   # a box that stops at the bounds, below them "default"
    assert (accumulate.minimum(), accumulate.maximum(), accumulate.specialValueText()) == (0, 16, "default")
    assert view.config().accumulate is None
    accumulate.setValue(4)
    assert view.config().accumulate == 4
    clip_by = view.more.controls["clip_by"]   # a list of the declared choices
    clip_by.setCurrentIndex(clip_by.findData("value"))
    assert view.config().clip_by == "value"
    view.more.controls["grad_clip"].setText("2.5")
    assert view.config().grad_clip == 2.5
    settings = QtCore.QSettings(QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Scope.UserScope, "t", "clip")
    view.save(settings)
    view.more.set_value("grad_clip", None)
    view.more.set_value("accumulate", None)
    view.restore(settings)
    assert view.config().grad_clip == 2.5 and view.config().accumulate == 4
    assert preset_base(view.config()).grad_clip == 2.5


def test_the_further_options_reach_the_config_and_an_experiment(panel):
    """The options the panel has no row for (seed, learning rate, hang timeout, profiled steps, timeline)
    are under More options, folded; what is set there, and the optimizer and precision, reach an
    experiment's base as the panel's other settings do."""
    from app.views.experiments_menu import preset_base
    more = panel.more
    assert more.names == ["seed", "lr", "loader_workers", "loader_cores", "pin_memory", "prefetch_factor",
                          "persistent_workers", "decode_cost_ms", "hang_timeout_s", "profile_steps", "timeline",
                          "peak"]   # each concern's together, under its name, as `run --help` groups them
    assert [h.text() for h in more.headers.values()] == ["Model", "Training", "Input", "Measurement"]
    assert not more.body.isVisible()
    more.toggle.click()
    assert more.body.isVisible()
    more.controls["seed"].setValue(7)
    more.controls["lr"].setText("0.05")
    more.controls["timeline"].setCurrentIndex(more.controls["timeline"].findData("all"))
    more.controls["peak"].setCurrentIndex(more.controls["peak"].findData("datasheet"))
    panel.optimizer_combo.setCurrentIndex(panel.optimizer_combo.findData("adamw"))
    config = panel.config()
    assert (config.seed, config.lr, config.timeline, config.hang_timeout_s) == (7, 0.05, "all", 120.0)
    assert config.peak == "datasheet"
    base = preset_base(config)
    assert (base.seed, base.lr, base.timeline, base.optimizer) == (7, 0.05, "all", "adamw")
    more.controls["lr"].setText("")
    assert panel.config().lr is None        # empty: the engine's default
    # the DataLoader's: a whole number, a switch, a number of milliseconds, with the input that reads them
    panel.input_combo.setCurrentIndex(panel.input_combo.findData("loader"))
    more.controls["loader_workers"].setValue(2)
    more.controls["persistent_workers"].setChecked(True)
    more.controls["decode_cost_ms"].setText("1.5")
    config = panel.config()
    assert (config.input_prep, config.loader_workers, config.persistent_workers, config.decode_cost_ms,
            config.pin_memory) == ("loader", 2, True, 1.5, False)
    assert preset_base(config).persistent_workers is True
    # A number is typed as the command line writes it, whatever the system's locale ("0,05" in German).
    from PySide6 import QtGui

    from app.views.more_options import MoreOptions
    from engine.run_options import options
    before = QtCore.QLocale()
    QtCore.QLocale.setDefault(QtCore.QLocale(QtCore.QLocale.Language.German))
    try:
        german = MoreOptions([o for o in options() if o.in_form])
    finally:
        QtCore.QLocale.setDefault(before)
    assert german.controls["lr"].validator().validate("0.05", 0)[0] == QtGui.QValidator.State.Acceptable
    assert german.controls["seed"].minimum() < 0        # any seed the command line takes


def test_the_sharded_strategies_optimizer_and_precision_are_picked_in_the_panel(panel):
    """Every strategy of the registry is in the picker with its description; the optimizer and the precision
    land in the config the panel builds, and survive the settings."""
    from engine.strategies import STRATEGIES
    combo = panel.strategy_combo
    assert [combo.itemData(i) for i in range(combo.count())] == [n for n, s in STRATEGIES.items() if s.in_picker]
    combo.setCurrentIndex(combo.findData("fsdp+tp"))
    panel.optimizer_combo.setCurrentIndex(panel.optimizer_combo.findData("adamw"))
    panel.dtype_combo.setCurrentIndex(panel.dtype_combo.findData("bfloat16"))
    config = panel.config()
    assert (config.strategy, config.optimizer, config.dtype) == ("fsdp+tp", "adamw", "bfloat16")
    assert config.split is None and config.micro_batches is None   # nothing of a pipeline's
    assert "2-D" in panel.strategy_desc.text()
    settings = QtCore.QSettings(QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Scope.UserScope, "t", "t")
    panel.save(settings)
    panel.optimizer_combo.setCurrentIndex(0)
    panel.dtype_combo.setCurrentIndex(0)
    panel.restore(settings)
    assert (panel.config().optimizer, panel.config().dtype) == ("adamw", "bfloat16")


def test_the_memory_view_stacks_each_devices_memory_and_communication(qtbot, qapp_configured):
    """The Memory tab's bars are the exports' figures: a segment per kind and per collective, hovered by name."""
    from app.state.live_data import RunProgress
    from app.state.stored_run import memory_figures
    from app.views.memory_view import MemoryView
    from engine.results import Communication, RunSummary, TensorMemory, Traffic
    mib = 2 ** 20
    summary = RunSummary(devices=["cpu:0", "cpu:1"],
                         tensor_memory=[TensorMemory(params=mib, grads=mib, optimizer=2 * mib, activations=mib)] * 2,
                         communication=[Communication([Traffic("all-gather", 10, 2 * mib, 0.002),
                                                       Traffic("reduce-scatter", 5, mib, 0.001)])] * 2)
    view = shown(qtbot, MemoryView(), (900, 400))
    view.show_figures(*memory_figures(summary))
    assert view.memory_plot.segment_heights == {"params": [1.0, 1.0], "grads": [1.0, 1.0],
                                                "optimizer": [2.0, 2.0], "activations": [1.0, 1.0]}
    assert view.comm_plot.segment_heights == {"all-gather": [2.0, 2.0], "reduce-scatter": [1.0, 1.0]}
    assert view.memory_plot.legend_names() == ["params", "grads", "optimizer", "activations"]
    found = view.comm_plot.point_at(1.0, 1.0)
    assert found is not None and found.text.splitlines() == ["cpu:1", "all-gather 2 MiB", "reduce-scatter 1 MiB",
                                                             "total 3 MiB"]
    # live, from a step's reports: the same figures before the summary comes
    progress = RunProgress()
    progress.apply(Started(t=1.0, devices=[Device("cpu:0", "cpu", 0)]))
    progress.apply(Step(step=0, tensor_memory={"cpu:0": {"params": mib}},
                        communication={"cpu:0": {"all-reduce": [1, mib, 0.001]}}))
    memory, communication = progress.memory_figures()
    assert memory.bars.values == [1.0] and communication.bars.values == [1.0]
    view.show_figures(memory, communication)
    assert view.comm_plot.segment_heights == {"all-reduce": [1.0]}
    # fsdp's tracked step: its transient kinds are the bars' "other", its peak by torch's kinds in the hover
    peak = {"Sharded Param": mib, "Unsharded Param": 2 * mib, "All Gather": 2 * mib, "Reduce Scatter": 2 * mib,
            "Temp": mib, "OptState": 2 * mib}
    fsdp = RunSummary(devices=["cpu:0"], tensor_memory=[TensorMemory(params=mib, optimizer=2 * mib, step_peak=peak)])
    view.show_figures(*memory_figures(fsdp))
    assert view.memory_plot.segment_heights["other"] == [7.0]
    lines = view.memory_plot.point_at(0.0, 1.0).text.splitlines()
    assert lines[lines.index("step peak (torch's FSDPMemTracker):") + 1:] == [
        "  Sharded Param 1 MiB", "  Unsharded Param 2 MiB", "  All Gather 2 MiB", "  Reduce Scatter 2 MiB",
        "  Temp 1 MiB", "  OptState 2 MiB"]
