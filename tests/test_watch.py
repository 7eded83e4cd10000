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
    for t in watched.times:   # the other stage's part of each step, and the hand-overs (a sanity bound)
        assert "wait" in t.by_kind and 0.15 < t.idle_share < 0.85, t
    assert abs(watched_bubble - engine_bubble) < 0.05, (watched_bubble, engine_bubble)


LOADER = """
import argparse, os, sys
import torch
from torch.utils.data import DataLoader, Dataset

class Where(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, index):
        if index == 0:   # the first sample says where its worker runs
            with open(sys.argv[-1], "w") as f:
                f.write(",".join(map(str, sorted(os.sched_getaffinity(0)))))
        return torch.ones(4), torch.zeros(1)

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for inputs, targets in DataLoader(Where(), batch_size=8, num_workers=1):
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(inputs), targets).backward()
    optimizer.step()
"""


@pytest.mark.skipif(len(usable_cores()) < 2, reason="needs a core no device holds")
def test_the_command_places_loader_workers_off_the_devices_cores_and_stops_after_its_steps(tmp_path):
    """One rank on cpu:0: its DataLoader's worker runs on the cores no device holds, not on the rank's own (as
    it would by inheriting the rank's pinning); the script, which would read 1,250 batches, is stopped after
    --steps 4 and the summary printed as JSON."""
    script, where = tmp_path / "loader.py", tmp_path / "where.txt"
    script.write_text(LOADER)
    proc = subprocess.run([sys.executable, "main.py", "watch", "--devices", "cpu:1", "--steps", "4", "--json", "--",
                           str(script), str(where)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    spare = [c for c in usable_cores() if c != cpu_devices(1)[0].core]
    assert summary["loader_cores"] == spare and where.read_text() == ",".join(map(str, spare))
    assert summary["status"] == "finished" and summary["steps"] == 4 and summary["warmup"] == 1
    (times,) = summary["times"]
    assert times["device"] == "cpu:0" and times["steps"] == 3 and {"data", "backward"} <= set(times["by_kind"])


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
