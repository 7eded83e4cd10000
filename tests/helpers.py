"""Running the CLI as a user would, in a subprocess, for the tests."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, timeout: float = 120, check_json: bool = False, env: dict | None = None):
    """``python main.py ARGS``; returns the CompletedProcess (and the JSON summary with check_json)."""
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
    if check_json:
        assert proc.returncode == 0, proc.stderr
        return proc, json.loads(proc.stdout)
    return proc


def small_mlp(*extra: str) -> list[str]:
    return ["--model", "mlp", "--width", "64", "--depth", "4", "--batch-size", "64", "--steps", "4",
            "--warmup", "1", *extra]


def cli_together(*runs: list[str], timeout: float = 240, envs: list[dict] | None = None) -> list[dict]:
    """Several ``python main.py run ... --json`` at once, for results that do not depend on timing (the
    parameters training ends with); returns their JSON summaries, in order. ``envs``: each run's additions to
    the environment."""
    procs = [subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, **extra})
             for args, extra in zip(runs, envs or [{}] * len(runs))]
    summaries = []
    try:
        for proc, args in zip(procs, runs):
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{' '.join(args)}: {err}"
            summaries.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return summaries
