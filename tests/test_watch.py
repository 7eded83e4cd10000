"""Watching a user's own script, unmodified (engine/watch/): its ranks started as torchrun starts them, each
device's time by kind from torch's hooks, and the hooks changing nothing the script computes.

Every test here leaves no process behind (conftest's check after each test)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from engine.devices import cpu_devices, usable_cores
from engine.watch.launcher import Watch
from procs import ROOT

EXAMPLE = ROOT / "examples" / "ddp_train.py"
PIPELINE = ROOT / "examples" / "pipeline_train.py"


def final_loss(out: str) -> str:
    found = re.search(r"final loss (\S+)", out)
    assert found, out[-2000:]
    return found.group(1)


def test_a_watched_script_trains_exactly_as_unwatched_and_shows_each_devices_time_by_kind(capfd):
    """The same DDP script with a DataLoader, once untimed and once watched: the same final loss to the last
    digit printed, and on both devices every step's forward, backward, all-reduce, optimizer and data."""
    args = ["--steps", "4", "--decode-ms", "0.3", "--batch-size", "32"]
    plain = Watch(str(EXAMPLE), args, cpu_devices(2), instruments=False).run()
    plain_out = capfd.readouterr().out
    watched = Watch(str(EXAMPLE), args, cpu_devices(2)).run()
    watched_out = capfd.readouterr().out
    assert (plain.status, watched.status) == ("finished", "finished"), (plain.error, watched.error)
    assert final_loss(watched_out) == final_loss(plain_out)
    assert watched.steps == 4 and [t.device for t in watched.times] == ["cpu:0", "cpu:1"]
    for t in watched.times:
        assert {"forward", "backward", "communication", "optimizer", "data"} <= set(t.by_kind), t.by_kind
        assert t.steps == 3 and t.step_s > 0 and 0 <= t.idle_share < 1
        assert t.samples_per_s == pytest.approx(32 / t.step_s, rel=1e-6)   # the model's batch, per step
        # decoding 32 samples at 0.3 ms in the rank's own process (no loader workers): about 10 ms of data
        assert t.by_kind["data"] >= 32 * 0.3e-3
    assert watched.loss is not None and watched.diagnosis


def test_a_watched_naive_split_idles_as_much_as_the_engines_own_naive_split(tmp_path):
    """The pipelining example with one micro-batch (the naive split) watched on cpu:2, and the engine's own
    model-parallel run of the same model and split, in this test: each device waits on the other about half of
    every step, and the two bubbles agree within 0.05."""
    model = ["--width", "512", "--depth", "8", "--split", "4", "--batch-size", "1024"]
    watched = Watch(str(PIPELINE), [*model, "--steps", "6", "--micro-batches", "1"], cpu_devices(2)).run()
    assert watched.status == "finished", watched.error
    engine = subprocess.run([sys.executable, "main.py", "run", "--strategy", "model-parallel", "--model", "mlp",
                             *model, "--steps", "6", "--warmup", "1", "--devices", "cpu:2", "--json",
                             "--db", str(tmp_path / "runs.db")], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert engine.returncode == 0, engine.stderr[-3000:]
    summary = json.loads(engine.stdout)
    engine_bubble = summary["bubble"]["measured"]
    # The engine's run says its time by kind the same way (engine/record/time_by_kind.py), and names the idling.
    assert [d["device"] for d in summary["time_by_kind"]] == ["cpu:0", "cpu:1"]
    assert all({"forward", "backward"} <= set(d["by_kind"]) for d in summary["time_by_kind"])
    assert " idles " in summary["diagnosis"]
    watched_bubble = sum(t.idle_share for t in watched.times) / len(watched.times)
    for t in watched.times:
        assert "wait" in t.by_kind and 0.3 < t.idle_share < 0.7, t   # the other stage's half, and the hand-overs
    assert abs(watched_bubble - engine_bubble) < 0.05, (watched_bubble, engine_bubble)


@pytest.mark.skipif(len(usable_cores()) < 2, reason="needs a core no device holds")
def test_more_loader_workers_on_the_spare_core_cut_the_wait_for_data():
    """One rank on cpu:0 (core 0), its DataLoader's workers placed on the core no device holds: decoding in a
    worker beside the rank leaves it less of each step waiting for data than decoding in its own process. The
    second watch is the command's: stopped after its --steps, the summary printed as JSON."""
    args = ["--decode-ms", "1", "--batch-size", "32"]
    alone = Watch(str(EXAMPLE), [*args, "--steps", "6", "--workers", "0"], cpu_devices(1)).run()
    assert alone.status == "finished", alone.error
    assert alone.loader_cores == [c for c in usable_cores() if c != cpu_devices(1)[0].core]
    proc = subprocess.run([sys.executable, "main.py", "watch", "--devices", "cpu:1", "--steps", "6", "--json", "--",
                           str(EXAMPLE), *args, "--steps", "1000", "--workers", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    helped = json.loads(proc.stdout.strip().splitlines()[-1])
    assert helped["status"] == "finished" and helped["steps"] == 6 and helped["warmup"] == 1
    (times,) = helped["times"]
    assert times["device"] == "cpu:0" and times["steps"] == 5 and "backward" in times["by_kind"]
    data_share = times["by_kind"]["data"] / times["step_s"]
    assert alone.times[0].share("data") > 0.5 and data_share < alone.times[0].share("data"), \
        (alone.times[0].share("data"), data_share)   # 32 ms of decoding a step, then beside the rank


def test_a_failing_script_ends_every_rank_and_says_why_with_its_traceback(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import os\n\n\ndef main():\n    if os.environ['RANK'] == '1':\n"
                      "        raise ValueError('rank 1 has no data')\n    import time\n    time.sleep(60)\n\n\n"
                      "main()\n")
    summary = Watch(str(script), [], cpu_devices(2)).run()
    assert summary.status == "failed" and "rank 1 (cpu:1): ValueError: rank 1 has no data" == summary.error
    assert "broken.py" in summary.traceback and "line 6" in summary.traceback


@pytest.mark.parametrize("options, script, script_args, says", [
    ([], "missing.py", [], "SCRIPT: no such file: missing.py"),
    ([], "torchrun", ["train.py"], "SCRIPT: give the script itself"),
    ([], "{bad}", [], "line 2: invalid syntax: def main(:"),
    (["--devices", "cuda:0"], str(EXAMPLE), [], "--devices: watch runs on CPU virtual devices for now"),
    (["--steps", "0"], str(EXAMPLE), [], "--steps: must be at least 1, got 0"),
])
def test_bad_input_is_refused_before_anything_starts(tmp_path, options, script, script_args, says):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef main(:\n    pass\n")
    proc = subprocess.run([sys.executable, "main.py", "watch", *options, "--", script.replace("{bad}", str(bad)),
                           *script_args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
