"""Bad input: exit 2, a line naming the option, nothing launched, nothing stored."""
from __future__ import annotations

import pytest

from engine import cli
from engine.devices import DeviceError, most_cpu_devices, parse, usable_cores
from engine.store import Store
from helpers import cli as run_cli

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

BROKEN_FILES = {
    "syntax": "def build_model(:\n",
    "raises": "raise RuntimeError('boom at import')\n",
    "no-model": "import torch\ndef make_batch(n, g):\n    return torch.randn(n, 4), torch.randn(n, 2)\n",
    "not-a-module": ("import torch\ndef build_model():\n    return torch.randn(4, 2)\n"
                     "def make_batch(n, g):\n    return torch.randn(n, 4), torch.randn(n, 2)\n"),
}

WHERE = {"syntax": ", line 1: `def build_model(:`: failed to load: SyntaxError:",
         "raises": ", line 1: `raise RuntimeError('boom at import')`: failed to load: RuntimeError: boom at import"}

CASES = {
    "unknown strategy": (["--strategy", "zero3"], "--strategy"),
    "unknown optimizer": (["--optimizer", "adam"], "--optimizer"),
    "unknown dtype": (["--dtype", "float16"], "--dtype"),
    "unknown peak": (["--peak", "vendor"], "--peak"),
    "tensor parallel without linear pairs": (["--model", "resnet18", "--strategy", "tensor-parallel", "--devices",
                                              "cpu:2"], "--model"),
    "tensor parallel on a traced module": (["--model", "torchvision:resnet18", "--image-size", "32", "--strategy",
                                            "tensor-parallel", "--devices", "cpu:2"], "--model"),
    "fsdp+tp on two devices": (["--strategy", "fsdp+tp", "--devices", "cpu:2"], "--devices"),
    "fsdp+tp on an odd count": (["--strategy", "fsdp+tp", "--devices", "cpu:5"], "--devices"),
    "hsdp on two devices": (["--strategy", "hsdp", "--devices", "cpu:2"], "--devices"),
    "hsdp on an odd count": (["--strategy", "hsdp", "--devices", "cpu:5"], "--devices"),
    "unknown model": (["--model", "gpt5"], "--model"),
    "unknown schedule": (["--strategy", "pipeline", "--devices", "cpu:2", "--schedule", "zigzag"], "--schedule"),
    "split out of range": (["--strategy", "model-parallel", "--devices", "cpu:2", "--split", "12"], "--split"),
    "split at an end": (["--strategy", "model-parallel", "--devices", "cpu:2", "--split", "0"], "--split"),
    "split not increasing": (["--strategy", "pipeline", "--devices", "cpu:3", "--split", "5,3"], "--split"),
    "split not a number": (["--strategy", "pipeline", "--devices", "cpu:2", "--split", "a"], "--split"),
    "micro-batches do not divide": (["--strategy", "pipeline", "--devices", "cpu:2", "--batch-size", "64",
                                     "--micro-batches", "5"], "--micro-batches"),
    "more stages than blocks": (["--model", "seed-toy", "--strategy", "pipeline", "--devices", "cpu:4"],
                                "--devices"),
    "device does not exist": (["--devices", "cuda:7"], "--devices"),
    "device not a device": (["--devices", "tpu:0"], "--devices"),
    "no CPU device": (["--devices", "cpu:0"], "--devices"),
    "an empty model name": (["--model", ""], "--model"),
    "a hang timeout past any timer": (["--hang-timeout", "1e23"], "--hang-timeout"),
    "an infinite learning rate": (["--lr", "1e309"], "--lr"),
    "zero steps": (["--steps", "0"], "--steps"),
    "negative batch size": (["--batch-size", "-4"], "--batch-size"),
    "missing model file": (["--model-file", "/nonexistent/model.py"], "--model-file"),
    "1f1b with too few micro-batches": (["--strategy", "pipeline", "--devices", "cpu:2", "--schedule", "1f1b",
                                         "--micro-batches", "1"], "--micro-batches"),
    "telemetry rate": (["--telemetry-hz", "500"], "--telemetry-hz"),
    "image size for a built-in model": (["--image-size", "32"], "--image-size"),
    "split level out of range": (["--split-level", "3"], "--split-level"),
    "split level for a chain of blocks": (["--split-level", "2"], "--split-level"),
    "unknown torchvision model": (["--model", "torchvision:resnet19"], "--model"),
    "more profiled steps than measured": (["--steps", "4", "--warmup", "2", "--profile-steps", "3"], "--profile-steps"),
    "stages per device the schedule cannot run": (["--strategy", "pipeline", "--devices", "cpu:2", "--schedule", "zbv",
                                                   "--stages-per-device", "3"], "--stages-per-device"),
    "stages per device without a pipeline": (["--stages-per-device", "2"], "--stages-per-device"),
    "dualpipev with fewer micro-batches than stages": (["--strategy", "pipeline", "--devices", "cpu:2", "--schedule",
                                                        "dualpipev", "--micro-batches", "2"], "--micro-batches"),
    "interleaved rounds that do not divide": (["--strategy", "pipeline", "--devices", "cpu:2", "--schedule",
                                               "interleaved1f1b", "--micro-batches", "5", "--batch-size", "60"],
                                              "--micro-batches"),
    "more stages than blocks, V per device": (["--model", "seed-toy", "--strategy", "pipeline", "--devices", "cpu:2",
                                               "--schedule", "loopedbfs"], "--devices"),
    "image too small for the model": (["--model", "torchvision:maxvit_t", "--image-size", "32"], "--image-size"),
    "split point not a submodule": (["--model", "torchvision:resnet18", "--image-size", "32", "--strategy",
                                     "pipeline", "--devices", "cpu:2", "--split", "layer3.1"], "--split"),
}


# The bound is this machine's (engine/devices.py most_cpu_devices: 8 a core, or its memory at 512 MB a rank): one
# device past it is refused on any machine; the cpu:1000 where the bound is below it (fewer than 125 cores);
# a million devices on every machine (8 a core would take 125,000 cores).
MOST_CPU_DEVICES = most_cpu_devices(usable_cores())[0]
TOO_MANY_CPU_DEVICES = sorted({MOST_CPU_DEVICES + 1, 1_000_000} | ({1000} if MOST_CPU_DEVICES < 1000 else set()))


def assert_invalid(code, err, option, db):
    assert code == 2
    assert any(line.startswith(f"error: {option}") for line in err.splitlines()), err
    with Store(db) as store:
        assert store.list_runs() == []  # nothing launched, nothing stored


@pytest.mark.parametrize("case", list(CASES))
def test_bad_option(case, capsys, fresh_store):
    args, option = CASES[case]
    code = cli.main(["run", "--steps", "2", *args] if "--steps" not in args else ["run", *args])
    assert_invalid(code, capsys.readouterr().err, option, fresh_store)


@pytest.mark.parametrize("count", TOO_MANY_CPU_DEVICES)
def test_more_cpu_devices_than_the_machine_runs_are_refused(count, capsys, fresh_store):
    code = cli.main(["run", "--steps", "2", "--devices", f"cpu:{count}"])
    err = capsys.readouterr().err
    assert_invalid(code, err, "--devices", fresh_store)
    assert f"'cpu:{count}': at most cpu:{MOST_CPU_DEVICES} here (" in err, err


def test_the_bound_on_cpu_devices_is_itself_allowed():
    assert len(parse(f"cpu:{MOST_CPU_DEVICES}", 1)) == MOST_CPU_DEVICES
    with pytest.raises(DeviceError, match=f"at most cpu:{MOST_CPU_DEVICES} here"):
        parse(f"cpu:{MOST_CPU_DEVICES + 1}", 1)


@pytest.mark.parametrize("kind", list(BROKEN_FILES))
def test_broken_model_file(kind, tmp_path, capsys, fresh_store):
    path = tmp_path / f"{kind}.py"
    path.write_text(BROKEN_FILES[kind])
    code = cli.main(["run", "--model-file", str(path), "--steps", "2"])
    err = capsys.readouterr().err
    assert_invalid(code, err, "--model-file", fresh_store)
    assert str(path) in err
    if kind in WHERE:  # the line of the file, and its text, as Python's traceback would show them
        assert WHERE[kind] in err, err


def test_every_problem_is_reported_at_once(capsys, fresh_store):
    code = cli.main(["run", "--strategy", "nope", "--steps", "0", "--batch-size", "0"])
    err = capsys.readouterr().err
    assert code == 2
    for option in ("--strategy", "--steps", "--batch-size"):
        assert f"error: {option}" in err


def test_every_problem_is_reported_at_once_with_a_split_by_name(capsys, fresh_store):
    """A model that does not exist cannot have its blocks named; the other options are still checked."""
    code = cli.main(["run", "--model", "nosuch", "--strategy", "pipeline", "--devices", "cpu:2", "--split", "layer3",
                     "--batch-size", "0", "--micro-batches", "0"])
    err = capsys.readouterr().err
    assert code == 2
    for option in ("--model", "--batch-size", "--micro-batches"):
        assert f"error: {option}" in err


def test_bad_input_from_the_real_command_line(fresh_store):
    proc = run_cli("run", "--strategy", "pipeline", "--devices", "cpu:2", "--split", "99", "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "error: --split" in proc.stderr


WATCH_CASES = {
    "more CPU devices than the machine runs": (["--devices", f"cpu:{MOST_CPU_DEVICES + 1}"],
                                               f"error: --devices: 'cpu:{MOST_CPU_DEVICES + 1}': at most cpu:"),
    "no CPU device": (["--devices", "cpu:0"], "error: --devices: 'cpu:0': N in cpu:N must be a whole number"),
    "a hang timeout past any timer": (["--hang-timeout", "1e23"], "error: --hang-timeout: must be more than 0 and "
                                                                  "at most"),
}


@pytest.mark.parametrize("case", list(WATCH_CASES))
def test_a_watch_with_bad_options_is_refused_before_any_rank_starts(case, tmp_path, fresh_store):
    args, said = WATCH_CASES[case]
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('never started')\n")
    proc = run_cli("watch", *args, "--db", str(fresh_store), "--", str(script))
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert "never started" not in proc.stderr + proc.stdout
    with Store(fresh_store) as store:
        assert store.list_runs() == []


def test_a_model_file_that_prints_still_passes_the_checks(tmp_path, fresh_store):
    """The command line checks in a child whose answers come on stdout: a user's prints go elsewhere."""
    path = tmp_path / "chatty.py"
    path.write_text("import torch\nprint('loading my model')\n"
                    "def build_model():\n    print('building')\n    return torch.nn.Sequential(torch.nn.Linear(4, 2))\n"
                    "def make_batch(n, g):\n    return torch.randn(n, 4, generator=g), torch.randn(n, 2, generator=g)\n")
    proc = run_cli("run", "--model-file", str(path), "--steps", "2", "--devices", "cpu:1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "validation failed" not in proc.stderr


def test_unknown_flag_is_exit_2(capsys):
    assert cli.main(["run", "--frobnicate"]) == 2
    assert "--frobnicate" in capsys.readouterr().err
