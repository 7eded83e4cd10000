"""`make gpu-check` runs where only torch, torchvision, nvidia-ml-py, psutil and pytest are installed.

Its CPU-runnable part (``--cpu``: the same runs and experiment on CPU virtual
devices) runs here with PySide6, pyqtgraph, platformdirs and matplotlib blocked in
every process it starts (the CLI, the worker, the ranks), as on the GPU machine;
every engine module imports there too (only drawn exports need matplotlib, and
import it when they draw: tests/test_export.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from procs import ROOT

BLOCKER = """
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph', 'platformdirs', 'matplotlib'):
            raise ImportError('not installed on the GPU machine: ' + name)
sys.meta_path.insert(0, Blocked())
"""


# Its 18 commands take about 56 s of CPU, one after the other: 145 s on a machine at load 8, past the default 300 s
# beside two other suites (load 25, 2026-12-07). A deadline that still ends a hang; each run has its own (240 s).
@pytest.mark.timeout(600)
def test_gpu_check_runs_on_an_engine_only_interpreter(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("SPLITSCOPE_DB", None)  # the script keeps its runs in a store of its own
    every_module = ("import pkgutil, importlib, engine\n"
                    "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
                    "    importlib.import_module(m.name)\n"
                    "print('every engine module imported', flush=True)\n"
                    "import platformdirs")
    blocked = subprocess.run([sys.executable, "-c", every_module], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120)
    assert blocked.stdout.strip() == "every engine module imported", blocked.stderr
    # and the blocker reaches child processes
    assert blocked.stderr.strip().endswith("not installed on the GPU machine: platformdirs"), blocked.stderr

    out = tmp_path / "cpu-check.json"
    proc = subprocess.run([sys.executable, "tools/gpu_check.py", "--cpu", "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["ok"] and report["mode"] == "cpu"
    assert [r["status"] for r in report["runs"]] == ["finished"] * 7, report["runs"]
    assert report["runs"][1]["split"] == [5]  # --split layer3: the tutorial's split of a ResNet
    # FSDP2, AdamW and autocast need nothing the GPU machine lacks; the report keeps memory and communication
    fsdp = report["runs"][6]
    assert fsdp["ok"] and fsdp["tensor_memory"][0]["optimizer"] > 0
    assert {t["operation"] for t in fsdp["communication"][0]["traffic"]} == {"all-gather", "reduce-scatter"}
    assert set(report["compare_strategies"]["points"]) == {"single", "model-parallel", "pipeline", "data-parallel",
                                                          "ddp"}
    # the DataLoader's workers: both points ran, and the rank that decodes its own batches waits on them
    loader = report["input_pipeline"]
    assert loader["ok"] and [p["workers"] for p in loader["points"]] == [0, 1]
    assert loader["points"][0]["input_wait"] > 0
    # MFU in both dtypes, from the engine's types read back from the JSON; no energy counter on a CPU device
    efficiency = report["efficiency"]
    assert efficiency["ok"] and [r["name"] for r in efficiency["runs"]] == ["mlp single cpu:1 float32",
                                                                            "mlp single cpu:1 bfloat16"]
    assert all(0 < r["mfu"] <= 1 and r["efficiency"][0]["measured_peak"] > 0 for r in efficiency["runs"])
    assert all(r["samples_per_joule"] is None for r in efficiency["runs"])
    # a watched script's profiled steps read back by the trace reader: each rank's CPU ops (no kernels on a CPU)
    watched = report["watched_profile"]
    assert watched["ok"] and [r["rank"] for r in watched["ranks"]] == [0, 1], watched
    assert "figures in" in proc.stdout
