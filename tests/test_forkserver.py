"""The fork server (engine/forkserver): its children are the processes ``python -m`` would start, with torch
imported already, and none outlives whoever asked for it.

The test session's own server serves them (it imports torch once, seconds); the owner's death is tried on
a server of a process of its own.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from engine.forkserver import ForkServer, ForkServerError, shared
from engine.forkserver.client import Connection, start
from helpers import cli_together, small_mlp
from procs import ROOT

TESTS = ROOT / "tests"


@pytest.fixture
def server() -> ForkServer:
    fork_server = shared()
    assert fork_server is not None, "no fork server on Linux"
    return fork_server


def probe_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]), PYTHONUNBUFFERED="",
                **extra)


def report(out: bytes) -> dict:
    return json.loads(out)


def test_a_child_is_what_python_m_would_start(server, tmp_path):
    """Environment, working directory, arguments, standard streams and descriptors as asked; the command line
    ps shows; the exit status; torch imported before the module ran (the point of the server)."""
    read_end, write_end = os.pipe()
    env = probe_env(PROBE_FD=str(write_end), PROBE_EXIT="7")
    try:
        forked = start(server.connection, "forked_probe", env=env, cwd=tmp_path, pass_fds=(write_end,),
                       argv=["--an", "argument"], title="(a title)")
    finally:
        os.close(write_end)
    out, err = forked.communicate(b"to stdin", timeout=60)
    assert os.read(read_end, 16) == b"hello"
    os.close(read_end)
    assert forked.returncode == 7, err
    seen = report(out)
    assert seen["env"] == env
    assert seen["cwd"] == str(tmp_path) and seen["argv"] == ["--an", "argument"] and seen["name"] == "__main__"
    assert seen["stdin"] == "to stdin" and seen["fds"] == sorted([0, 1, 2, write_end])
    assert seen["cmdline"] == f"{sys.executable} -m forked_probe --an argument (a title)"
    assert seen["torch_preloaded"] and seen["ppid"] == server.pid
    assert psutil.Process(server.pid).cmdline()[1:3] == ["-m", "engine.forkserver"]

    # The same module in a fresh interpreter finds the same, but for torch and its parent.
    fresh_read, fresh_write = os.pipe()
    fresh_env = dict(env, PROBE_FD=str(fresh_write))
    done = subprocess.run([sys.executable, "-m", "forked_probe", "--an", "argument"], input=b"to stdin",
                          capture_output=True, cwd=tmp_path, env=fresh_env, pass_fds=(fresh_write,), timeout=60)
    os.close(fresh_write)
    os.close(fresh_read)
    fresh = report(done.stdout)
    assert done.returncode == 7
    assert fresh["env"] == fresh_env and not fresh["torch_preloaded"]
    for key in ("cwd", "argv", "name", "stdin", "stdout_buffered"):
        assert seen[key] == fresh[key], key


def test_an_exception_exits_1_with_its_traceback_and_signals_reach_the_child(server, tmp_path):
    failing = start(server.connection, "forked_probe", env=probe_env(PROBE_RAISE="the model broke"), cwd=tmp_path)
    _, err = failing.communicate(timeout=60)
    assert failing.returncode == 1
    assert b"Traceback" in err and b"ValueError: the model broke" in err

    sleeper = start(server.connection, "forked_probe", env=probe_env(PROBE_SLEEP="60"), cwd=tmp_path)
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(0.2)
    sleeper.terminate()
    assert sleeper.wait(10) == -signal.SIGTERM
    sleeper.kill()  # ended already: nothing is sent, nothing fails


def test_a_connection_that_closes_takes_its_children(server, tmp_path):
    """A worker killed mid-run closes its connection: the server kills what it forked for it at once."""
    worker_side = Connection(server.connection.hand_over())
    sleeper = start(worker_side, "forked_probe", env=probe_env(PROBE_SLEEP="60"), cwd=tmp_path)
    process = psutil.Process(sleeper.pid)
    worker_side.close()
    gone, alive = psutil.wait_procs([process], timeout=10)
    assert not alive
    # and the server serves on
    again = start(server.connection, "forked_probe", env=probe_env(), cwd=tmp_path)
    again.communicate(timeout=60)
    assert again.returncode == 0


def test_a_request_it_cannot_serve_is_refused_and_it_serves_on(server, tmp_path):
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(ForkServerError, match="descriptors 0, 1 and 2"):
            server.connection.spawn("forked_probe", env=probe_env(), cwd=tmp_path, fds={1: write_end})
    finally:
        os.close(read_end)
        os.close(write_end)
    child = start(server.connection, "forked_probe", env=probe_env(), cwd=tmp_path)
    child.communicate(timeout=60)
    assert child.returncode == 0


def test_the_owner_killed_leaves_neither_server_nor_child(tmp_path):
    """The server reads its owner's end to its end: a SIGKILLed owner takes the server and its children."""
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys, time
        sys.path[:0] = [{str(ROOT)!r}, {str(TESTS)!r}]
        from engine.forkserver.client import ForkServer, start
        server = ForkServer()
        env = dict(os.environ, PYTHONPATH={str(TESTS)!r}, PROBE_SLEEP="120")
        child = start(server.connection, "forked_probe", env=env, cwd={str(tmp_path)!r})
        print(server.pid, child.pid, flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        server_pid, child_pid = map(int, owner.stdout.readline().split())
        processes = [psutil.Process(server_pid), psutil.Process(child_pid)]
        owner.kill()
        owner.wait()
        _, alive = psutil.wait_procs(processes, timeout=10)
        assert not alive, alive
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_runs_train_alike_forked_or_fresh():
    """The same run with its ranks forked by the CLI's fork server and started fresh
    (SPLITSCOPE_FORKSERVER=0) ends with the same parameters."""
    run = ["run", "--strategy", "ddp", "--devices", "cpu:2", *small_mlp(), "--json"]
    forked, fresh = cli_together(run, run, envs=[{}, {"SPLITSCOPE_FORKSERVER": "0"}])
    assert forked["status"] == fresh["status"] == "finished"
    assert forked["param_norm"] == pytest.approx(fresh["param_norm"], rel=1e-6)
    assert forked["loss"]["last"] == pytest.approx(fresh["loss"]["last"], rel=1e-6)


def test_a_worker_whose_fork_server_is_gone_starts_its_ranks_fresh(tmp_path):
    """The server went between the session's hand-over and the launch: the worker says so and the run goes on
    with fresh rank processes."""
    from engine.config import ExperimentConfig
    from engine.forkserver import wire
    ours, theirs = wire.pair()
    ours.close()
    config = ExperimentConfig(model="mlp", width=32, depth=3, batch_size=8, steps=2, warmup=1, strategy="ddp",
                              devices="cpu:2")
    env = dict(os.environ, SPLITSCOPE_FORKSERVER_FD=str(theirs.fileno()), PYTHONPATH=str(ROOT))
    worker = subprocess.Popen([sys.executable, "-m", "engine.worker"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env, pass_fds=(theirs.fileno(),))
    theirs.close()
    events = []
    try:
        worker.stdin.write(config.to_json() + "\n")  # and stdin stays open: its end would stop the run
        worker.stdin.flush()
        for line in worker.stdout:
            events.append(json.loads(line))
            if events[-1]["type"] == "finished":
                break
    finally:
        worker.stdin.close()
        worker.wait(30)
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert any(w.startswith("ranks start as fresh processes: ") for w in warnings), warnings
    assert events[-1]["type"] == "finished" and events[-1]["status"] == "finished", events[-3:]
