"""Shared fixtures: a fresh store per test, no process of a run left behind, ever, and garbage collected on
the main thread only.

Every process a test starts inherits SPLITSCOPE_TEST_TAG; after each test, any
live process carrying the tag (a worker, a rank, even one re-parented to init)
fails the test and is killed.

Python's automatic cyclic collector runs on whichever thread allocates; freeing a Qt
object there can deadlock the main thread in a PySide disconnect
(tests/app/gc_against_disconnect.py), which hung the suite once. As the app does while
its window lives (app/services/ui_thread_gc.py), the suite turns it off and collects
after each test, on the main thread, what the automatic collector would have by then.
"""
from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import wait_for_no_tagged  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The peak FLOP/s the ranks measure (engine/measure/peak.py) are cached in a folder of the suite's own, not the
# user's: measured once per suite (its xdist workers inherit the folder), as on a fresh machine.
if "SPLITSCOPE_CACHE_DIR" not in os.environ:
    os.environ["SPLITSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="splitscope-cache-")
    atexit.register(shutil.rmtree, os.environ["SPLITSCOPE_CACHE_DIR"], True)
gc.disable()


@pytest.fixture(autouse=True)
def garbage_collected_on_the_main_thread():
    yield
    counts, thresholds = gc.get_count(), gc.get_threshold()
    due = [generation for generation in range(3) if counts[generation] > thresholds[generation]]
    if due:
        gc.collect(due[-1])


@pytest.fixture(autouse=True)
def no_leftover_processes(request):
    yield
    # A run that just finished may still be reaping; give it a moment, then insist.
    alive = wait_for_no_tagged(timeout=10.0)
    if alive:
        described = [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in alive if p.is_running()]
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        pytest.fail(f"test left processes behind: {described}")


@pytest.fixture(autouse=True)
def fresh_store(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite3"
    monkeypatch.setenv("SPLITSCOPE_DB", str(db))
    return db


# The files that take longest (seconds of one worker's time, phase one of `make test` on 2026-12-07 beside two other
# suites on the machine: about 1.2 times a quiet run's), started first: xdist hands files to its three workers in
# collection order, and a long file handed out last leaves the others idle until it ends. The rest keep their order.
LONGEST_FIRST = ("test_nodes.py",             # 175
                 "test_any_module.py",        # 174
                 "test_gpu_check.py",         # 155 (CPU 56 s: mostly waiting on its runs' processes)
                 "test_zoo.py",               # 130
                 "test_watch.py",             # 127
                 "test_fsdp_memory.py",       # 102
                 "test_export.py",            # 98
                 "test_any_module_in_app.py",  # 85
                 "test_forkserver.py",        # 84
                 "test_in_process.py",        # 74
                 "test_fuzz.py",              # 71
                 "test_main_window.py",       # 69
                 "test_export_from_app.py",   # 67
                 "test_flops.py",             # 65
                 "test_planner_service.py",   # 51
                 "test_long_runs.py",         # 45 (101 with 30,000 synthetic steps)
                 "test_advise_in_app.py",     # 41
                 "test_real_scripts.py",      # 38
                 "test_experiments.py",       # 37 without its solo tests
                 "test_hangs.py",             # 36
                 "test_training.py")          # 35


def _longest_first(items) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    # NVML, not torch: importing torch here would cost every test run seconds.
    from engine.devices import gpu_count
    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory):
    """Two namespace "machines" with a node agent each (tests/netns.py), for the whole session: node1's clock
    reads 1000 s ahead of this machine's (a time namespace), as another machine's would differ. Their agents
    run watched scripts (--allow-scripts)."""
    import netns
    why = netns.available()
    if why:
        pytest.skip(f"namespace nodes: {why}")
    cluster = netns.Cluster(2, tmp_path_factory.mktemp("nodes"), clock_offsets=[0.0, 1000.0],
                            agent_options=("--allow-scripts",))   # they run watched scripts too (tests/test_nodes.py)
    try:
        cluster.make()
        yield cluster
    finally:
        cluster.close()


# The naive split and the GPipe pipeline of an mlp big enough that compute dominates the per-micro-batch
# overheads, small enough for CI; the pipeline twice as wide (its bubble nears the theory's as a wider model's
# compute dwarfs gloo's copies over loopback: 0.24-0.26 at width 512, 0.236 at 1024).
NAIVE_MLP = ("--model", "mlp", "--width", "512", "--depth", "8", "--batch-size", "2048", "--steps", "12",
             "--warmup", "2", "--devices", "cpu:2", "--json")


@pytest.fixture(scope="session")
def naive_split_and_pipeline(tmp_path_factory):
    """(db, naive split's summary, pipeline's summary), run once a session, one after the other: the
    measurements and the telemetry tests read them (tests/test_measurements.py, tests/test_telemetry_run.py)."""
    from helpers import cli
    db = str(tmp_path_factory.mktemp("naive-and-pipeline") / "runs.sqlite3")
    _, naive = cli("run", *NAIVE_MLP, "--strategy", "model-parallel", "--db", db, check_json=True, timeout=300)
    _, piped = cli("run", *NAIVE_MLP, "--width", "1024", "--strategy", "pipeline", "--micro-batches", "4",
                   "--db", db, check_json=True, timeout=300)
    return db, naive, piped
