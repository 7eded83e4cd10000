"""The planner process's protocol (app/services/planner_service.py), spoken to as the app speaks to it: a
heavy model's profile says how far it is, and a newer request ends it at once."""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time

from engine.config import ExperimentConfig
from procs import ROOT


# A deadline, not a timing: beside two other suites (load 9 to 16, 2026-12-07) the small mlp's answer after the
# superseded resnet18 took more than 60 s.
def read_until(proc: subprocess.Popen, wanted, timeout: float = 180) -> list[dict]:
    """The planner's messages up to and including the first that ``wanted(message)`` accepts."""
    seen, deadline = [], time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(json.loads(line))
            if wanted(seen[-1]):
                return seen
    raise AssertionError(f"the planner did not say it within {timeout} s; it said {seen}")


def send(proc: subprocess.Popen, request_id: int, config: ExperimentConfig) -> None:
    proc.stdin.write(json.dumps({"id": request_id, "config": config.to_dict(), "profile": True}) + "\n")
    proc.stdin.flush()


def test_a_heavy_profile_says_how_far_it_is_and_a_newer_request_ends_it():
    proc = subprocess.Popen([sys.executable, "-m", "app.services.planner_service"], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        read_until(proc, lambda m: m["kind"] == "ready")
        send(proc, 1, ExperimentConfig(model="resnet18", strategy="model-parallel", devices="cpu:2"))
        heavy = read_until(proc, lambda m: m["kind"] == "profiling")
        assert heavy[0]["kind"] == "check" and heavy[0]["problems"] == [], heavy
        assert 0 <= heavy[-1]["fraction"] < 1 and heavy[-1]["id"] == 1
        send(proc, 2, ExperimentConfig(model="mlp", width=64, depth=4, strategy="model-parallel", devices="cpu:2"))
        answers = read_until(proc, lambda m: m["kind"] == "blocks" and m["id"] == 2)
        ended = next(m for m in answers if m["kind"] == "blocks" and m["id"] == 1)
        assert ended["superseded"] and ended["blocks"] is None and ended["error"] is None
        fractions = [m["fraction"] for m in heavy + answers if m["kind"] == "profiling" and m["id"] == 1]
        assert fractions == sorted(fractions)                       # how far, only ever further
        light = answers[-1]
        assert light["error"] is None and len(light["blocks"]) == 5 and not light.get("superseded")
    finally:
        proc.stdin.close()   # EOF: the planner ends, as when the app closes
        try:
            # A sanity bound, not a timing: in one loaded clean-clone run the planner had not ended 10 s after
            # EOF (slow or stuck, not known; a stuck one still fails here).
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
