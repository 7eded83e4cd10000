"""ChildProcess (app/services/child_process.py): the app's torch helpers, forked by its fork server or started
fresh, driven from the event loop; none outlives its end."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest
import shiboken6

from app.services.child_process import ChildProcess
from engine import forkserver
from tests.app.app_helpers import set_small_mlp

HERE = Path(__file__).parent  # echo_child.py


@pytest.fixture(params=["forked", "fresh"])
def mode(request, monkeypatch):
    if request.param == "fresh":
        monkeypatch.setenv(forkserver.SWITCH_ENV, "0")
    return request.param


@pytest.fixture
def echo():
    """``echo(*argv)``: a ChildProcess of echo_child and the list its output goes to. Each is deleted on this
    (the UI) thread at the end: a parentless QObject left to the cyclic collector may be collected on another
    thread (an export's drawing thread did, in a later test), and Qt aborts on a child object destroyed there."""
    made: list[ChildProcess] = []

    def make(*argv: str) -> tuple[ChildProcess, list[bytes]]:
        child = ChildProcess("echo_child", argv=argv, cwd=HERE, title="(a test's echo)")
        out: list[bytes] = []
        child.sigStdout.connect(out.append)
        made.append(child)
        return child, out
    yield make
    for child in made:
        child.end(grace_s=0.0)
        shiboken6.delete(child)


def test_a_child_reads_what_came_before_it_was_up_and_reports_its_end(qtbot, mode, echo):
    child, out = echo("3")
    child.start()
    child.write(b"one\n")  # before it is up: kept for it
    qtbot.waitUntil(lambda: b"".join(out) == b"ONE\n", timeout=60_000)
    parent = psutil.Process(child.pid).ppid()
    assert parent == (forkserver.shared_pid() if mode == "forked" else os.getpid())
    if mode == "forked":
        assert " ".join(psutil.Process(child.pid).cmdline()).endswith("-m echo_child 3 (a test's echo)")
    child.write(b"two\n")
    with qtbot.waitSignal(child.sigFinished, timeout=10_000) as done:
        child.close_input()
    assert b"".join(out) == b"ONE\nTWO\n"
    assert done.args == [3, "bye\n"]


def test_a_killed_child_reports_the_signal(qtbot, mode, echo):
    child, out = echo()
    child.start()
    child.write(b"up\n")
    qtbot.waitUntil(lambda: bool(out), timeout=60_000)
    with qtbot.waitSignal(child.sigFinished, timeout=10_000) as done:
        child.kill()
    assert done.args[0] == -signal.SIGKILL


def test_end_kills_a_child_that_ignores_its_eof_and_one_still_starting(qtbot, mode, echo):
    stuck, out = echo()
    stuck.start()
    stuck.write(b"hang\n")
    qtbot.waitUntil(lambda: stuck.pid is not None, timeout=60_000)
    process = psutil.Process(stuck.pid)
    stuck.end(grace_s=0.3)  # a forked child: killed by the server once its connection closed, not waited for
    _, alive = psutil.wait_procs([process], timeout=10)
    assert not alive or alive[0].status() == psutil.STATUS_ZOMBIE
    # Ended before its process is up: the starting thread kills it once it is (the conftest fails the test
    # if it is left behind).
    early, _ = echo()
    early.start()
    early.end(grace_s=0.3)
    early._thread.join(60)  # it started, then killed what it started
    if early._started is not None:
        process = early._started[0]
        assert process.wait(10) is not None  # ended (the conftest also finds none left)


def test_a_kill_asked_while_the_child_starts_ends_it_once_up(qtbot, mode, echo):
    child, _ = echo()
    with qtbot.waitSignal(child.sigFinished, timeout=60_000) as done:
        child.start()
        child.kill()
    assert done.args[0] == -signal.SIGKILL


def test_the_planner_comes_back_after_a_crash(qtbot, window):
    planner = window.planner
    qtbot.waitUntil(lambda: planner.ready, timeout=60_000)
    first = planner._proc.pid
    with qtbot.waitSignal(planner.sigCrashed, timeout=10_000) as crashed:
        os.kill(first, signal.SIGKILL)
    assert "the planner process ended (exit -9)" in crashed.args[0]
    qtbot.waitUntil(lambda: planner.ready and planner._proc is not None and planner._proc.pid != first,
                    timeout=60_000)
    with qtbot.waitSignal(window.sigChecked, timeout=30_000):  # and it answers the window's checks again
        set_small_mlp(window, strategy="single", devices="cpu:1")
