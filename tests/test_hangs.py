"""Nothing hangs silently (issue 52): the user's code that never returns ends at the hang timeout with a message
naming what did not return, the rank that stopped is the one named, and nothing a watched script started outlives
its run, a daemon in a session of its own included."""
from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import threading
import time
from types import SimpleNamespace

import psutil
import pytest

from engine.config import ExperimentConfig
from engine.events import Started
from engine.results import Step
from engine.run.failure import START_UP_ALLOWANCE_S
from engine.run.session import RunSession
from helpers import start_cli
from procs import tagged_processes

LIMIT_S = 4   # --hang-timeout of every hang here
# What a case may take besides its limit: the CLI's, its check's and its ranks' start, eight cases side by side on
# two cores (up to 78 s each with four spinning processes alongside). Below the start-up allowance, so that a hang
# held to that allowance instead of its limit fails.
START_UP_MARGIN_S = 150
assert LIMIT_S + START_UP_MARGIN_S < START_UP_ALLOWANCE_S

MODEL_TAIL = '''
def make_batch(batch_size, generator):
    return torch.randn(batch_size, 4, generator=generator), torch.randn(batch_size, 4, generator=generator)
'''
HANGS = {
    # name: (file body, the command's arguments after the file, what the message must say)
    "a model file that loops at import": (
        "import torch\nfrom torch import nn\nwhile True:\n    pass\n" + MODEL_TAIL, "run",
        ["importing loops_at_import.py did not return within 4 s", "--hang-timeout"]),
    "a build_model() that never returns": (
        "import time\nimport torch\ndef build_model():\n    time.sleep(3600)\n" + MODEL_TAIL, "run",
        ["build_model() did not return within 4 s"]),
    "a make_batch() that never returns": (
        "import threading\nimport torch\nfrom torch import nn\n"
        "class Two(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)\n"
        "    def forward(self, x):\n        return self.b(self.a(x))\n"
        "def build_model():\n    return Two()\n"
        "def make_batch(batch_size, generator):\n    threading.Event().wait()\n", "run",
        ["make_batch() did not return within 4 s"]),
    # validation draws no batch for a chain of blocks: the rank's first step is where it waits
    "a make_batch() that never returns, in the run": (
        "import threading\nimport torch\nfrom torch import nn\n"
        "def build_model():\n    return nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))\n"
        "def make_batch(batch_size, generator):\n    threading.Event().wait()\n", "run",
        ["rank 0", "hung in its first step", "4 s (--hang-timeout)", "last seen in make_batch (hang_3.py:7)"]),
    "a plain script that never reaches a first step": (
        "import time\nimport torch\nprint('loading', flush=True)\ntime.sleep(3600)\n", "python",
        ["the script", "hung while running the script, before its first training step", "4 s (--hang-timeout)",
         "never_steps_python.py:4"]),
    "torchrun ranks that never reach a first step": (
        "import time\nimport torch\ntime.sleep(3600)\n", "torchrun",
        ["rank", "hung while running the script, before its first training step", "4 s (--hang-timeout)"]),
    "a script that asks for input": (
        "import torch\nname = input('your name? ')\n", "python", ["EOFError: EOF when reading a line"]),
    "torchrun ranks that read their stdin to its end": (
        "import sys\nimport time\nimport torch\ndata = sys.stdin.read()\nprint('read', len(data), flush=True)\n"
        "time.sleep(3600)\n", "torchrun", ["read 0", "hung while running the script"]),
}
FILE_NAMES = {"a model file that loops at import": "loops_at_import.py",
              "a plain script that never reaches a first step": "never_steps_python.py"}


def command(kind: str, path) -> list[str]:
    if kind == "run":
        return ["run", "--model-file", str(path), "--steps", "2", "--hang-timeout", str(LIMIT_S)]
    launcher = ["python"] if kind == "python" else ["torchrun", "--nproc-per-node", "2"]
    devices = ["--devices", "cpu:2"] if kind == "torchrun" else []
    return ["watch", "--hang-timeout", str(LIMIT_S), *devices, "--", *launcher, str(path)]


def test_each_hang_ends_at_its_limit_with_a_message_and_leaves_no_process(tmp_path):
    before = {p.pid for p in tagged_processes()}
    procs, started, ended, said = {}, {}, {}, {}

    def wait_for(name: str) -> None:   # each process's own end time: not after the ones waited for before it
        out, err = procs[name].communicate(timeout=240)
        ended[name], said[name] = time.monotonic(), out + err
    for name, (body, kind, _) in HANGS.items():   # all at once: each waits most of its time
        path = tmp_path / FILE_NAMES.get(name, f"hang_{len(procs)}.py")
        path.write_text(textwrap.dedent(body))
        started[name] = time.monotonic()
        procs[name] = start_cli(*command(kind, path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waiters = [threading.Thread(target=wait_for, args=(name,)) for name in procs]
    try:
        for waiter in waiters:
            waiter.start()
        for waiter in waiters:
            waiter.join()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, proc in procs.items():
        assert name in ended, (name, "did not end within 240 s")
        assert proc.returncode in (1, 2), (name, proc.returncode, said[name][-2000:])
        for needle in HANGS[name][2]:
            assert needle in said[name], (name, needle, said[name][-2000:])
        took = ended[name] - started[name]
        assert took < LIMIT_S + START_UP_MARGIN_S, (name, f"{took:.0f} s", said[name][-2000:])
    _, alive = psutil.wait_procs([p for p in tagged_processes() if p.pid not in before], timeout=10)
    assert alive == [], [p.cmdline() for p in alive]


def test_the_rank_that_stopped_is_named_not_its_waiting_peers():
    """One rank of three stopped (SIGSTOP) mid-run: its peers wait in DDP's all-reduce for it and still answer,
    its heartbeat stops; the watchdog names it, before gloo's own timeout fails a healthy peer."""
    pids: dict[str, int] = {}
    steps = threading.Event()

    def on_event(event):
        if isinstance(event, Started):
            pids.update(event.pids)
        elif isinstance(event, Step) and event.step >= 3:
            steps.set()
    config = ExperimentConfig(strategy="ddp", devices="cpu:3", model="mlp", width=64, depth=4, batch_size=48,
                              steps=100000, warmup=0, hang_timeout_s=LIMIT_S)
    session = RunSession(config, on_event=on_event)
    session.start()
    try:
        assert steps.wait(120), "no steps"
        stopped = pids["1"]
        os.kill(stopped, signal.SIGSTOP)
        result = session.wait(120)
    finally:
        session.stop()
    assert result is not None and result.status == "failed"
    assert f"rank 1 (cpu:1, pid {stopped}) hung in step" in result.error, result.error
    assert "its heartbeat stopped" in result.error and f"{LIMIT_S} s (--hang-timeout)" in result.error, result.error
    _, alive = psutil.wait_procs(tagged_processes(), timeout=15)
    assert alive == []


def test_the_users_build_is_held_to_the_hang_timeout_and_the_set_up_after_it_to_the_allowance(monkeypatch):
    """In a rank, building the model is the user's code (its phase held to --hang-timeout); the engine's set-up
    after it, up to Ready (the strategy's executor, the peaks measured on the device: over 4 s when eight runs share
    two cores), is the engine's own start-up, held to the start-up allowance (engine/run/heartbeat.py START_UP)."""
    from engine.devices import cpu_devices
    from engine.models import build as build_module
    from engine.run import heartbeat, rank
    phases, events = [], []

    class Phases:   # what run_rank asks of its Heartbeat
        phase = heartbeat.BUILDING

        def enter(self, phase):
            self.phase = phase

        def training(self):
            self.phase = heartbeat.TRAINING
    beat = Phases()

    def noting(what, function):
        def call(*args, **kwargs):
            phases.append((what, beat.phase))
            return function(*args, **kwargs)
        return call
    monkeypatch.setattr(build_module, "build", noting("build", build_module.build))
    monkeypatch.setattr(rank, "device_peaks", noting("peaks", rank.device_peaks))
    config = ExperimentConfig(model="mlp", width=16, depth=2, batch_size=4, steps=1, warmup=0, devices="cpu:1")
    devices = cpu_devices(1)
    rank.run_rank(config, devices, 0, 1, SimpleNamespace(emit=events.append), devices[0], heartbeat=beat)
    assert phases == [("build", heartbeat.BUILDING), ("peaks", heartbeat.PREPARING)]
    assert heartbeat.BUILDING not in heartbeat.START_UP and heartbeat.PREPARING in heartbeat.START_UP
    assert [type(e).__name__ for e in events][:1] == ["Ready"] and beat.phase == heartbeat.TRAINING


DAEMON_SCRIPT = '''
import os, sys, time
import torch
from torch import nn

if os.fork() == 0:          # a daemon as the books make one: fork, a session of its own, fork again
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
while not os.path.exists(sys.argv[1]) or not open(sys.argv[1]).read():
    time.sleep(0.05)
model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
'''


@pytest.mark.parametrize("launch", ["python", "torchrun"])
def test_a_daemon_the_script_started_ends_with_the_watch(tmp_path, launch):
    script, pid_file = tmp_path / "starts_a_daemon.py", tmp_path / "daemon.pid"
    script.write_text(DAEMON_SCRIPT)
    launcher = ["python"] if launch == "python" else ["torchrun", "--nproc-per-node", "1"]
    proc = start_cli("watch", "--", *launcher, str(script), str(pid_file), stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-2000:]
    daemon = int(pid_file.read_text())
    assert gone_within(daemon, 10), f"the daemon {daemon} outlived the watch"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.quick
def test_an_experiment_whose_points_fail_alike_says_the_error_once():
    from engine.cli.report import experiment_table
    from engine.experiments.reduction import failed_point
    from engine.results import ExperimentResult
    broke = "rank 0 (cpu:0, pid {}) failed: ValueError: user model broke"
    points = [failed_point(f"split size {size}", "pipeline", size, broke.format(100 + size), [f"r{size}"])
              for size in (16, 32, 64)] + [failed_point("split size 128", "pipeline", 128, "out of memory", ["r"])]
    table = experiment_table(ExperimentResult("e1", "split-size", points=points))
    assert table.count("user model broke") == 1, table
    assert "split size 32            failed: as split size 16" in table and "out of memory" in table
