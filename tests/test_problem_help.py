"""The checks' problems in the app's words, and the fixes offered for them: pure functions, no Qt, no torch."""
from __future__ import annotations

import pytest

from app.state.problem_help import Fix, Help, explain, explain_all, in_app_words, split_fixes
from engine.config import ExperimentConfig
from engine.problems import Problem
from no_qt import run_without_qt

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def config(**overrides) -> ExperimentConfig:
    return ExperimentConfig(**dict(dict(strategy="model-parallel", model="mlp", width=64, depth=4, devices="cpu:2",
                                        batch_size=64, steps=6), **overrides))


def test_single_on_two_devices_is_said_in_the_apps_words_and_offers_one_device():
    problem = Problem("devices", "single uses exactly one device, got 2 (cpu:0, cpu:1)")
    help = explain(problem, config(strategy="single"))
    assert help.text == "Single device runs on one device; Devices is set to 2 CPU devices (cpu:0, cpu:1)."
    assert help.fixes == (Fix("Use 1 device", {"devices": "cpu:1"}),)
    assert "--" not in help.text
    # On GPUs the one device is the first GPU named.
    gpu = explain(problem, config(strategy="single", devices="cuda:0,cuda:1"), gpus=2)
    assert gpu.text.endswith("Devices is set to 2 GPUs (cuda:0, cuda:1).")
    assert gpu.fixes == (Fix("Use 1 device", {"devices": "cuda:0"}),)


def test_a_second_split_point_on_two_devices_offers_to_keep_either():
    problem = Problem("split", "2 split point(s) make 3 stages, but there are 2 devices")
    help = explain(problem, config(split=(2, 3)))
    assert help.text == ("2 split points make 3 stages, but Devices is set to 2 CPU devices (cpu:0, cpu:1), one "
                         "per stage: keep 1 split point.")
    assert [f.label for f in help.fixes] == ["Keep only split at block 2", "Keep only split at block 3"]
    assert help.fixes[1].changes == {"split": (3,)}


@pytest.mark.parametrize("split, stages, balanced, expected", [
    ((2, 3), 2, None, [("Keep only split at block 2", (2,)), ("Keep only split at block 3", (3,))]),
    ((1, 2, 3), 3, None, [("Keep splits at blocks 1, 2", (1, 2)), ("Keep splits at blocks 2, 3", (2, 3))]),
    ((2,), 3, (1, 3), [("Use the balanced split (1, 3)", (1, 3))]),      # too few: the balanced one
    ((2,), 3, None, []),                                                  # too few, nothing balanced yet
    ((2,), 2, (3,), []),                                                  # fits: nothing to fix
    ((1, 3), 2, (3,), [("Keep only split at block 1", (1,)), ("Keep only split at block 3", (3,))]),  # once
])
def test_split_fixes_fit_the_split_to_the_stages(split, stages, balanced, expected):
    assert [(f.label, f.changes["split"]) for f in split_fixes(split, stages, balanced)] == expected


def test_micro_batches_that_do_not_divide_the_batch_offer_the_nearest_that_do():
    problem = Problem("micro_batches", "must divide the batch size 64; 5 does not")
    help = explain(problem, config(strategy="pipeline", micro_batches=5))
    assert help.text == "Micro-batches: 5 does not divide the batch size 64."
    assert help.fixes == (Fix("Use 4 micro-batches", {"micro_batches": 4}),
                          Fix("Use 8 micro-batches", {"micro_batches": 8}))


def test_1f1b_with_too_few_micro_batches_offers_enough_or_gpipe():
    problem = Problem("micro_batches", "the 1f1b schedule needs at least as many micro-batches as "
                                                     "stages (2), got 1")
    help = explain(problem, config(strategy="pipeline", schedule="1f1b", micro_batches=1))
    assert [f.label for f in help.fixes] == ["Use 2 micro-batches", "Use gpipe"]
    assert help.fixes[1].changes == {"schedule": "gpipe"}


def test_a_staged_run_on_one_device_offers_two():
    problem = Problem("devices", "model-parallel needs at least 2 devices (one per stage), got 1")
    help = explain(problem, config(devices="cpu:1"))
    assert help.text.startswith("Model-parallel puts each stage on a device of its own")
    assert help.text.endswith("Devices is set to 1 CPU device (cpu:0).")
    assert help.fixes == (Fix("Use 2 devices", {"devices": "cpu:2"}),)
    more = explain(Problem("devices", "8 stages but the model has only 5 blocks"),
                   config(devices="cpu:8"), n_blocks=5)
    assert more.fixes == (Fix("Use 5 devices", {"devices": "cpu:5"}),)


def test_problems_without_words_of_their_own_name_the_controls_not_the_flags():
    assert in_app_words("micro_batches", "give either --micro-batches or --split-size, not both") == \
        "Micro-batches: give either Micro-batches or Split size, not both"
    assert in_app_words("config", "validation failed: boom") == "validation failed: boom"
    # an option with no row of its own (under More options) by the label it declares, its flag too
    assert in_app_words("prefetch_factor", "needs --loader-workers 1 or more") == \
        "Prefetch factor: needs Loader workers 1 or more"
    assert in_app_words("decode_cost_ms", "must be from 0 to 1000 (ms per sample), got 2000") == \
        "Decode cost (ms per sample): must be from 0 to 1000 (ms per sample), got 2000"
    assert in_app_words("lr", "see --hang-timeout") == "Learning rate: see Hang timeout"
    # explain_all keeps what the views and the Run rules read, and adds the words and fixes.
    (shown,) = explain_all([Problem("steps", "must be from 1 to 10000000, got 0")], config())
    assert shown == Help("steps", "must be from 1 to 10000000, got 0", "Steps: must be from 1 to 10000000, got 0")


def test_the_devices_box_names_the_devices_a_run_will_have_and_says_when_they_share_cores():
    from app.state.device_words import device_choices, sampled_text, sharing_warning
    choices = {c.spec: c for c in device_choices(2, [])}
    assert choices["cpu:1"].text == "1 CPU device (cpu:0)"     # not "the second device"
    assert choices["cpu:2"].text == "2 CPU devices (cpu:0, cpu:1)"
    assert choices["cpu:4"].text == "4 CPU devices (cpu:0 … cpu:3), sharing 2 cores"
    assert choices["cpu:8"].text == "8 CPU devices (cpu:0 … cpu:7), sharing 2 cores"
    assert "share cores" in choices["cpu:3"].tip
    warning = sharing_warning(config(devices="cpu:4", strategy="ddp"), cores=2)
    assert warning.startswith("4 CPU devices on 2 cores: devices share cores")
    assert "utilization reads per core" in warning and "busy shares and step times" in warning
    assert sharing_warning(config(devices="cpu:2"), cores=2) is None
    from engine.telemetry.gpu_inventory import GpuInfo
    gpus = [GpuInfo(0, cuda_index=0, name="H100"), GpuInfo(1, cuda_index=1, name="H100")]
    texts = {c.spec: c.text for c in device_choices(2, gpus)}
    assert texts["cuda:0,cuda:1"] == "2 GPUs (cuda:0, cuda:1)" and texts["cpu,cuda:0"].startswith("2 devices")
    # The status line counts what the machine has: a run's cpu:3 is a core's work, not a fifth device.
    assert sampled_text(["core 0", "core 1", "cpu:2", "cpu:3"]) == "2 cores"
    assert sampled_text(["core 0", "cuda:0"]) == "1 core, 1 GPU"


def test_stages_sharing_a_gpu_are_said_to_share_it():
    from engine.devices import describe, parse
    assert describe(parse("cuda:0,cuda:0", 2, gpus=1)) == "2 stages on 1 GPU (cuda:0)"


def test_error_text_loses_reprs_escapes():
    from app.state.error_text import exception_text, readable
    leaked = "rank 0 sent a garbled line: '{\"type\": \"error\", \"message\": \"can\\'t\"'"
    assert "\\" not in readable(leaked) and "can't" in readable(leaked)
    assert readable("C:\\Users\\me\\model.py: no such file") == "C:\\Users\\me\\model.py: no such file"
    assert exception_text(KeyError("can't find \"layer3\"")) == 'KeyError: can\'t find "layer3"'


def test_the_new_state_modules_need_no_qt():
    proc = run_without_qt("""
        import app.state.problem_help, app.state.device_words, app.state.error_text
        assert not [m for m in sys.modules if m.startswith(("PySide6", "pyqtgraph", "torch"))]
    """)
    assert proc.returncode == 0, proc.stderr
