"""fsdp's tensor memory by kind, and its step's peak, against torch's own FSDPMemTracker (issue 29)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from engine import forkserver
from engine.figures.run import tensor_memory_figure
from engine.forkserver.client import start
from engine.results import RunSummary, from_json
from helpers import ROOT, cli

WIDTH, DEPTH, BATCH = 256, 4, 256


def reference(world: int = 2) -> list[dict]:
    """tests/fsdp_reference.py on ``world`` ranks over loopback: each rank's FSDPMemTracker readings. The ranks
    fork from this process's fork server (engine/forkserver), torch imported there once, as the engine's ranks
    do: a fresh interpreter each imported it again (about 3 s of CPU a rank)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    argv = [str(port), str(WIDTH), str(DEPTH), str(BATCH)]
    server = forkserver.shared()
    ranks = [start(server.connection, "fsdp_reference", env=env, cwd=ROOT, argv=[str(rank), str(world), *argv])
             if server is not None else
             subprocess.Popen([sys.executable, "-m", "fsdp_reference", str(rank), str(world), *argv], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for rank in range(world)]
    readings = []
    try:
        for rank in ranks:
            out, err = rank.communicate(timeout=120)
            assert rank.wait() == 0, err.decode()
            readings.append(json.loads(out))
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    return readings


def test_fsdp_memory_by_kind_and_its_step_peak_are_torchs_fsdpmemtrackers(tmp_path):
    """fsdp, mlp 256x4, batch 256, AdamW on cpu:2, every block its own FSDP unit. What each rank holds is
    what torch's FSDPMemTracker counts for it: its parameter and gradient shards, AdamW's state for them, the
    activations its forward saves (its chunk's input and the loss's, by their own bytes, as ddp's). The step's
    peak, by torch's kinds, is the tracker's on the same step, and it shows what the held kinds do not: one
    block gathered at a time (its whole parameters, the all-gather's output, the reduce-scatter's input),
    backward's temporaries, and the whole batch each rank holds as its input."""
    _, fsdp = cli("run", "--model", "mlp", "--width", str(WIDTH), "--depth", str(DEPTH), "--batch-size", str(BATCH),
                  "--optimizer", "adamw", "--strategy", "fsdp", "--devices", "cpu:2", "--steps", "3", "--warmup", "2",
                  "--db", str(tmp_path / "runs.sqlite3"), "--json", check_json=True)
    summary = from_json(RunSummary, fsdp)
    block = (WIDTH * WIDTH + WIDTH) * 4   # one Linear(256, 256)'s weight and bias, float32
    for memory, torchs in zip(summary.tensor_memory, reference(), strict=True):
        assert memory.params == torchs["step"]["Sharded Param"]
        assert memory.grads == torchs["backward"]["Sharded Grad"] == memory.params
        assert memory.optimizer == torchs["step"]["OptState"]
        # The tracker counts what the forward allocated (the loss's two scalars among it), not the chunk taken
        # before it; the engine counts the chunk as saved, by its own bytes.
        assert memory.activations == torchs["forward"]["Activation"] - torchs["loss_bytes"] + torchs["input_bytes"]
        peak = {kind: size for kind, size in torchs["peak"].items() if kind != "Total" and size}
        # The peak's moment in backward moves with gloo's thread: a block's reduce-scatter may end just before it
        # or just after (its gradient shard, 131,584 B, there or not: 268,308 B of "Sharded Grad" in most runs,
        # 399,892 in one of eight), and which of backward's tensors are the forward's ("Activation") or its own
        # ("Temp") moves with it (131,084 + 525,312 B or 262,156 + 394,240). What FSDP gathers, scatters and
        # holds does not move.
        fixed = ("Sharded Param", "Unsharded Param", "All Gather", "Reduce Scatter", "OptState", "Inputs")
        assert {k: memory.step_peak.get(k) for k in fixed} == {k: peak.get(k) for k in fixed}, (memory.step_peak, peak)
        assert abs(sum(memory.step_peak.values()) - sum(peak.values())) <= block // 2, (memory.step_peak, peak)
        assert peak["Unsharded Param"] == peak["All Gather"] == peak["Reduce Scatter"] == block
        assert peak["Inputs"] == BATCH * WIDTH * 4 + BATCH * 8
        transient = sum(memory.step_peak[k] for k in ("Unsharded Param", "All Gather", "Reduce Scatter", "Temp"))
        assert memory.other == sum(memory.step_peak.values()) - memory.total < transient
        assert memory.step_peak_text().startswith(
            f"{sum(memory.step_peak.values()) / 2 ** 20:.3g} MiB (Sharded Param 0.507, Unsharded Param 0.251")
    from engine.cli.report import summary_table
    assert any(line.startswith("step peak ") and "All Gather 0.251" in line
               for line in summary_table(summary).splitlines())
    figure = tensor_memory_figure(summary.devices, summary.tensor_memory)
    assert "other (MiB)" in figure.columns and "step peak: All Gather (MiB)" in figure.columns
    assert figure.rows[0][figure.columns.index("step peak: All Gather (MiB)")] == block / 2 ** 20



TRACKER_IMPORT = """
import sys, torch, torch.distributed.fsdp
from engine.strategies.fsdp_peak import _fsdp_mem_tracker
tracker = _fsdp_mem_tracker()
print('compiler loaded' if 'torch._inductor' in sys.modules else 'compiler not loaded')
import torch.distributed._tools.mem_tracker
from torch.distributed._tools import FSDPMemTracker, RuntimeEstimator
print(FSDPMemTracker is tracker, torch.distributed._tools.mem_tracker.MemTracker.__name__, RuntimeEstimator.__name__)
"""


def test_the_tracker_loads_without_torchs_compiler_and_its_package_stays_whole_for_others():
    """torch.distributed._tools' own __init__ imports inductor, dynamo and triton (3.3 s a rank); the tracker
    comes without them, and whoever imports that package later in the process still gets all of it."""
    proc = subprocess.run([sys.executable, "-c", TRACKER_IMPORT], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["compiler not loaded", "True MemTracker RuntimeEstimator"]
