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
