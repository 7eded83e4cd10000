"""Finding the processes a test run started: each inherits SPLITSCOPE_TEST_TAG (set by conftest)."""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TAG = os.environ.setdefault("SPLITSCOPE_TEST_TAG", f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}")
# Under pytest-xdist every worker inherits the controller's tag: each makes it its own, or one worker's runs
# would read as another's leftovers.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and not TAG.endswith(f"-{_WORKER}"):
    TAG = os.environ["SPLITSCOPE_TEST_TAG"] = f"{TAG}-{_WORKER}"


def tagged_processes(tag: str = TAG) -> list[psutil.Process]:
    """Live processes whose environment carries the tag, other than this one, its fork server and its store
    process (they live as long as the test session; the fork server's children are counted)."""
    from engine.forkserver import shared_pid
    from engine.store import store_process_pid
    found = []
    ours = {os.getpid(), shared_pid(), store_process_pid()}
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in ours:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("SPLITSCOPE_TEST_TAG") == tag:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_for_no_tagged(timeout: float = 10.0) -> list[psutil.Process]:
    """Processes still alive after ``timeout`` (psutil.wait_procs waits on exit, not on a sleep)."""
    procs = tagged_processes()
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return alive
