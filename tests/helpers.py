"""Running the CLI as a user would, in a subprocess, for the tests."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def fork_server_handed_over(env: dict):
    """A connection to this test process's warm fork server for the command about to start (its validation child
    and ranks fork there, not in a server of its own that imports torch again): (env, pass_fds)."""
    from engine import forkserver
    connection = forkserver.hand_over_connection()
    if connection is None:
        yield env, ()
        return
    try:
        yield {**env, forkserver.CONNECTION_ENV: str(connection.fileno())}, (connection.fileno(),)
    finally:
        connection.close()


def cli(*args: str, timeout: float = 120, check_json: bool = False, env: dict | None = None):
    """``python main.py ARGS``; returns the CompletedProcess (and the JSON summary with check_json)."""
    with fork_server_handed_over({**os.environ, **(env or {})}) as (full_env, fds):
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout, env=full_env, pass_fds=fds)
    if check_json:
        assert proc.returncode == 0, proc.stderr
        return proc, json.loads(proc.stdout)
    return proc


def start_cli(*args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    """``python main.py ARGS`` started (subprocess.Popen's keywords), with the warm fork server handed over."""
    with fork_server_handed_over({**os.environ, **(env or {})}) as (full_env, fds):
        return subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], cwd=ROOT, env=full_env, pass_fds=fds,
                                **popen)


def start_torchrun(script, *args: str, log_dir) -> subprocess.Popen:
    """torch's own ``torchrun --standalone --nproc-per-node 2 SCRIPT ARGS`` (text output piped), the reference a
    watched script is compared with; its logs in ``log_dir`` (without one torchrun leaves a torchelastic_* folder
    in the temporary directory). ``end_torchrun`` it when done."""
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "--log-dir", str(log_dir), str(script), *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))


def end_torchrun(proc: subprocess.Popen) -> None:
    """A torchrun that has not ended (a test that timed out or failed meanwhile) killed with its ranks."""
    if proc.poll() is None:
        import psutil
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()


def run_torchrun(script, *args: str, log_dir, timeout: float = 240) -> subprocess.CompletedProcess:
    """``start_torchrun`` to its end (killed with its ranks past ``timeout`` seconds)."""
    proc = start_torchrun(script, *args, log_dir=log_dir)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        end_torchrun(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def small_mlp(*extra: str) -> list[str]:
    return ["--model", "mlp", "--width", "64", "--depth", "4", "--batch-size", "64", "--steps", "4",
            "--warmup", "1", *extra]


def cli_together(*runs: list[str], timeout: float = 240, envs: list[dict] | None = None) -> list[dict]:
    """Several ``python main.py run ... --json`` at once, for results that do not depend on timing (the
    parameters training ends with); returns their JSON summaries, in order. ``envs``: each run's additions to
    the environment."""
    procs = [start_cli(*args, env=extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args, extra in zip(runs, envs or [{}] * len(runs), strict=True)]
    summaries = []
    try:
        for proc, args in zip(procs, runs, strict=True):
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{' '.join(args)}: {err}"
            summaries.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return summaries
