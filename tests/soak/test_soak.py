"""Soak (issue 6, item 3): 100 short runs back to back through the app's own worker client.

Every 5th run is stopped midway. Afterwards nothing may be left behind: no
child process, no file descriptor or thread beyond a small slack, and the
process's memory within 50 MB of where it stood once warm. ``make soak`` runs
it (it is not part of ``make test``); the figures are printed at the end for
the README.
"""
from __future__ import annotations

import faulthandler
import gc
import os
import threading
import time

import psutil
import pytest

RUNS = 100
STOP_EVERY = 5
WARMUP_RUNS = 5            # the baseline for memory is taken after these (first imports, caches, sqlite)
RSS_SLACK = 50 * 2 ** 20   # issue 6: within 50 MB of where it started
FD_SLACK = 4
RUN_TIMEOUT_MS = 60_000


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]


def settle(qtbot, predicate, timeout_s: float = 10.0) -> bool:
    """Spin the event loop until ``predicate()`` holds (threads and pipes wind down after a run)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        qtbot.wait(50)
    return predicate()


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_soak_100_runs_through_the_worker_client(qtbot, tmp_path, capsys):
    faulthandler.cancel_dump_traceback_later()   # pytest's 280 s dump is meant for ordinary tests
    from app.services.worker_client import WorkerClient
    from engine.config import ExperimentConfig
    from engine.results import Step

    client = WorkerClient(db_path=str(tmp_path / "soak.sqlite3"), telemetry_hz=10.0)
    steps_seen = [0]
    client.sigEvents.connect(lambda events: steps_seen.__setitem__(
        0, steps_seen[0] + sum(1 for e in events if isinstance(e, Step))))
    me = psutil.Process()

    def one_run(stop_midway: bool):
        steps_seen[0] = 0
        config = ExperimentConfig(strategy="single", model="seed-toy", devices="cpu:1",
                                  steps=1_000_000 if stop_midway else 3, warmup=1)
        with qtbot.waitSignal(client.sigFinished, timeout=RUN_TIMEOUT_MS) as finished:
            client.start(config)
            if stop_midway:
                qtbot.waitUntil(lambda: steps_seen[0] >= 1, timeout=RUN_TIMEOUT_MS)
                client.stop()
        return finished.args[0]

    fds_before, threads_before = fd_count(), threading.active_count()
    rss_start = me.memory_info().rss
    rss_peak = rss_start
    baseline = None
    statuses: dict[str, int] = {}
    problems: list[str] = []
    t0 = time.perf_counter()
    for i in range(1, RUNS + 1):
        stop_midway = i % STOP_EVERY == 0
        info = one_run(stop_midway)
        statuses[info.status] = statuses.get(info.status, 0) + 1
        expected = "stopped" if stop_midway else "finished"
        if info.status != expected:
            problems.append(f"run {i}: {info.status} (expected {expected}): {info.error}")
        rss_peak = max(rss_peak, me.memory_info().rss)
        if i == WARMUP_RUNS:
            gc.collect()
            baseline = me.memory_info().rss
    wall_s = time.perf_counter() - t0

    # Let the last run's threads and pipes wind down, then count what is left.
    settle(qtbot, lambda: not children() and threading.active_count() <= threads_before
           and fd_count() <= fds_before + FD_SLACK)
    gc.collect()
    left_children = [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in children()]
    fds_after, threads_after = fd_count(), threading.active_count()
    rss_end = me.memory_info().rss
    leaks = []
    if left_children:
        leaks.append(f"processes: {left_children}")
    if fds_after > fds_before + FD_SLACK:
        leaks.append(f"file descriptors: {fds_before} -> {fds_after}")
    if threads_after > threads_before:
        leaks.append(f"threads: {threads_before} -> {threads_after} "
                     f"({[t.name for t in threading.enumerate()]})")
    grown = rss_end - baseline
    if grown > RSS_SLACK:
        leaks.append(f"memory: {grown / 2 ** 20:.1f} MB more than after {WARMUP_RUNS} runs")

    mb = 2 ** 20
    figures = (
        f"soak: {RUNS} runs ({statuses.get('finished', 0)} finished, {statuses.get('stopped', 0)} stopped midway, "
        f"{sum(v for k, v in statuses.items() if k not in ('finished', 'stopped'))} other) in {wall_s:.0f} s "
        f"({wall_s / RUNS:.2f} s a run)\n"
        f"soak: RSS start {rss_start / mb:.0f} MB, after {WARMUP_RUNS} runs {baseline / mb:.0f} MB, "
        f"end {rss_end / mb:.0f} MB ({grown / mb:+.1f} MB), peak {rss_peak / mb:.0f} MB\n"
        f"soak: file descriptors {fds_before} -> {fds_after}, threads {threads_before} -> {threads_after}, "
        f"child processes left {len(left_children)}\n"
        f"soak: leaks found: {'; '.join(leaks) if leaks else 'none'}")
    with capsys.disabled():
        print("\n" + figures)
    assert not problems, problems[:5]
    assert not leaks, leaks
