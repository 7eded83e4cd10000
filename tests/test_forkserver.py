"""The fork server (engine/forkserver): its children are the processes ``python -m`` would start, with torch
imported already; none outlives whoever asked for it; what it cannot serve is refused, and started fresh.

The test session's own server serves them (it imports torch once, seconds); the owner's death and a server
started from a short-lived thread are tried on servers of their own.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from engine.config import ExperimentConfig
from engine.events import Launched
from engine.forkserver import (
    ForkServer,
    ForkServerError,
    client as forkserver_client,
    datagrams,
    run_module,
    shared,
    shared_pid,
)
from engine.forkserver.client import start
from engine.forkserver.connection import Connection
from helpers import cli
from procs import ROOT

TESTS = ROOT / "tests"
TINY_DDP = dict(model="mlp", width=32, depth=3, batch_size=8, warmup=1, strategy="ddp", devices="cpu:2")


@pytest.fixture
def server() -> ForkServer:
    fork_server = shared()
    assert fork_server is not None, "no fork server on Linux"
    return fork_server


def probe_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]), PYTHONUNBUFFERED="",
                **extra)


def test_a_child_is_what_python_m_would_start(server, tmp_path):
    """The same module forked and in a fresh interpreter finds the same environment (torch's imports' own
    variables included), working directory, sys.path head, arguments, streams and descriptors; the command
    line ps shows; the exit status. But torch is imported before it runs: the point of the server."""
    read_end, write_end = os.pipe()
    env = probe_env(PROBE_FD=str(write_end), PROBE_EXIT="7", PROBE_TORCH="1")
    try:
        forked = start(server.connection, "forked_probe", env=env, cwd=tmp_path, pass_fds=(write_end,),
                       argv=["--an", "argument"], title="(a title)")
    finally:
        os.close(write_end)
    out, err = forked.communicate(b"to stdin", timeout=60)
    assert os.read(read_end, 16) == b"hello"
    os.close(read_end)
    assert forked.returncode == 7 and err == b"", err
    seen = json.loads(out)
    assert seen["torch_preloaded"] and seen["ppid"] == server.pid
    # The server's heap is out of the collector's reach: a child's full collection neither walks nor copies it.
    assert seen["frozen"] > 100_000
    assert seen["cmdline"] == f"{sys.executable} -m forked_probe --an argument (a title)"
    assert psutil.Process(server.pid).cmdline()[1:3] == ["-m", "engine.forkserver"]

    fresh_read, fresh_write = os.pipe()
    done = subprocess.run([sys.executable, "-m", "forked_probe", "--an", "argument"], input=b"to stdin",
                          capture_output=True, cwd=tmp_path, env=dict(env, PROBE_FD=str(fresh_write)),
                          pass_fds=(fresh_write,), timeout=120)
    os.close(fresh_write)
    os.close(fresh_read)
    fresh = json.loads(done.stdout)
    assert done.returncode == 7 and not fresh["torch_preloaded"] and fresh["frozen"] == 0
    assert seen["env"] == dict(fresh["env"], PROBE_FD=str(write_end))
    assert seen["fds"] == sorted([0, 1, 2, write_end]) and fresh["fds"] == sorted([0, 1, 2, fresh_write])
    assert seen["path"][0] == fresh["path"][0] == str(tmp_path) and set(fresh["path"]) <= set(seen["path"])
    for key in ("cwd", "argv", "name", "stdin", "stdout_buffered"):
        assert seen[key] == fresh[key], key


def test_the_server_imports_what_a_request_names_once_before_forking_it(server, tmp_path):
    """A request's ``imports`` (a run's strategy's and model's, engine/run/local_ranks.py): imported by the server
    before it forks that child, so the child and every later one find it imported; a module that does not import
    is the child's to fail on, as a fresh process would, and the child is forked all the same."""
    def modules_seen(**imports) -> dict:
        child = start(server.connection, "forked_probe", env=probe_env(PROBE_MODULES="poplib,imaplib"),
                      cwd=tmp_path, **imports)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        return json.loads(out)["preloaded"]
    assert modules_seen() == {"poplib": False, "imaplib": False}   # in no request yet, and in no preload
    assert modules_seen(imports=["poplib", "no_such_module_anywhere"]) == {"poplib": True, "imaplib": False}
    assert modules_seen()["poplib"] is True   # imported once: every later child has it


def test_an_exception_exits_1_with_its_traceback_and_signals_reach_the_child(server, tmp_path):
    failing = start(server.connection, "forked_probe", env=probe_env(PROBE_RAISE="the model broke"), cwd=tmp_path)
    _, err = failing.communicate(timeout=60)
    assert failing.returncode == 1
    assert err.startswith(b"Traceback") and err.rstrip().endswith(b"ValueError: the model broke")

    sleeper = start(server.connection, "forked_probe", env=probe_env(PROBE_SLEEP="60"), cwd=tmp_path)
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(0.2)
    sleeper.terminate()
    assert sleeper.wait(10) == -signal.SIGTERM
    sleeper.kill()  # ended: nothing is sent to a pid that may be another process's by now
    assert sleeper.returncode == -signal.SIGTERM


def test_an_entry_module_the_server_imported_runs_afresh_and_quietly(server):
    """engine.run.validate, as the validation child: its answers, and nothing on stderr (runpy warns about a
    module it finds imported already)."""
    config = ExperimentConfig(**TINY_DDP, steps=2)
    request = json.dumps({"names_only": False, "items": [{"config": config.to_dict(), "tokens": None}]})
    done = run_module("engine.run.validate", input=request, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT,
                      timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    (answer,) = json.loads(done.stdout)
    assert answer["problems"] == [] and answer["plan"]["world_size"] == 2


def test_a_connection_that_closes_takes_its_children(server, tmp_path):
    """A worker killed mid-run closes its connection: the server kills what it forked for it at once."""
    worker_side = Connection(server.connection.hand_over())
    sleeper = start(worker_side, "forked_probe", env=probe_env(PROBE_SLEEP="60"), cwd=tmp_path)
    process = psutil.Process(sleeper.pid)
    worker_side.close()
    _, alive = psutil.wait_procs([process], timeout=10)
    assert not alive
    again = start(server.connection, "forked_probe", env=probe_env(), cwd=tmp_path)  # and it serves on
    again.communicate(timeout=60)
    assert again.returncode == 0


def test_what_it_cannot_serve_is_refused_and_it_serves_on(server, tmp_path):
    """Descriptors missing or too many, or an environment that differs where the interpreter and torch read
    it once at start: refused, with why (the asker starts that process fresh)."""
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(ForkServerError, match="descriptors 0, 1 and 2"):
            server.connection.spawn("forked_probe", env=probe_env(), cwd=tmp_path, fds={1: write_end})
        with pytest.raises(ForkServerError, match="TORCH_LOGS differ from the fork server's"):
            start(server.connection, "forked_probe", env=probe_env(TORCH_LOGS="+dynamo"), cwd=tmp_path)
        extra = [os.dup(write_end) for _ in range(6)]  # and stdin, stdout, stderr: 9
        try:
            with pytest.raises(ForkServerError, match="at most 8"):
                start(server.connection, "forked_probe", env=probe_env(), cwd=tmp_path, pass_fds=extra)
        finally:
            for fd in extra:
                os.close(fd)
        # A client that sends more anyway: refused, and its connection kept.
        raw = server.connection.hand_over()
        request = {"op": "spawn", "id": 0, "module": "forked_probe", "env": probe_env(), "cwd": str(tmp_path),
                   "fds": list(range(10))}
        socket.send_fds(raw, [json.dumps(request).encode()], [write_end] * 10)
        assert datagrams.receive(raw) == ({"op": "refused", "id": 0, "error": "more than 8 descriptors"}, [])
        # Nonsense ignored (an op that is not a name, a signal no kernel has), a mistyped spawn refused naming
        # the field; the server serves on (below).
        for nonsense in ({"op": []}, {"op": {"a": 1}}, {"op": "signal", "pid": os.getpid(), "signal": 10 ** 30}):
            raw.send(json.dumps(nonsense).encode())
        raw.send(json.dumps(dict(request, id=1, env={"A": 1}, fds=[0, 1, 2])).encode())
        assert datagrams.receive(raw) == ({"op": "refused", "id": 1, "error": "garbled: spawn's env is not "
                                                                         "dict[str, str]"}, [])
        raw.close()
    finally:
        os.close(read_end)
        os.close(write_end)
    child = start(server.connection, "forked_probe", env=probe_env(), cwd=tmp_path)
    child.communicate(timeout=60)
    assert child.returncode == 0


def test_the_owner_killed_leaves_neither_server_nor_child(tmp_path):
    """The server has the parent-death signal and reads its owner's end to its end: a SIGKILLed owner takes
    the server and its children."""
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


def test_a_server_started_from_a_thread_that_ends_lives_on(tmp_path):
    """The parent-death signal comes when the thread that started a process ends: the app starts its runs'
    sessions from threads that do. The server outlives such a thread."""
    made: list[ForkServer] = []
    starter = threading.Thread(target=lambda: made.append(ForkServer()))
    starter.start()
    starter.join()
    (fork_server,) = made
    try:
        child = start(fork_server.connection, "forked_probe", env=probe_env(), cwd=tmp_path)
        child.communicate(timeout=120)
        assert child.returncode == 0 and fork_server.alive()
    finally:
        fork_server.close()
    assert not psutil.pid_exists(fork_server.pid) or psutil.Process(fork_server.pid).status() == psutil.STATUS_ZOMBIE


def test_cuda_touched_before_forking_is_refused():
    """Asking whether CUDA is there (torch.cuda.is_available) leaves a forked child unable to use it, though
    torch.cuda.is_initialized() says no: the server checks in a forked child, and would not serve. (Untouched,
    it serves: every run here has its ranks forked, test_a_sessions_ranks_are_forked_by_its_fork_server.)"""
    import torch
    if torch.version.cuda is None:
        pytest.skip("a CPU-only torch build cannot be left in a bad fork")
    check = "from engine.forkserver.server import unsafe_to_fork; print(unsafe_to_fork())"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    touched = subprocess.run([sys.executable, "-c", f"import torch; torch.cuda.is_available(); {check}"],
                             capture_output=True, text=True, env=env, timeout=120)
    assert touched.stdout.startswith("CUDA was touched by the imports"), touched.stdout + touched.stderr


def test_a_sessions_ranks_are_forked_by_its_fork_server():
    """A run through RunSession (the CLI's and the app's path): its ranks are the fork server's children, and
    say which rank they are."""
    from engine.run.session import RunSession
    seen: list = []

    def on_event(event):
        if isinstance(event, Launched):
            for pid in event.pids.values():
                process = psutil.Process(pid)
                deadline = time.monotonic() + 10
                # A child names itself a few statements after the fork
                while "engine.run.rank" not in " ".join(process.cmdline()) and time.monotonic() < deadline:
                    time.sleep(0.01)
                seen.append((process.ppid(), " ".join(process.cmdline())))
            session.stop()
    session = RunSession(ExperimentConfig(**TINY_DDP, steps=100_000), on_event=on_event)
    session.start()
    result = session.wait(120)
    assert result.status == "stopped"
    assert [ppid for ppid, _ in seen] == [shared_pid()] * 2
    assert [title.split(" -m ", 1)[1] for _, title in seen] == ["engine.run.rank (rank 0 of 2 on cpu:0)",
                                                               "engine.run.rank (rank 1 of 2 on cpu:1)"]


def test_the_switch_turns_the_fork_server_off(monkeypatch):
    """SPLITSCOPE_FORKSERVER=0: no server, so every process starts fresh, as where there can be none (the path
    the next test's worker takes)."""
    monkeypatch.delenv(forkserver_client.SWITCH_ENV, raising=False)
    assert forkserver_client.enabled()
    monkeypatch.setenv(forkserver_client.SWITCH_ENV, "0")
    assert not forkserver_client.enabled() and shared() is None


def _run_with_its_server_gone(config: ExperimentConfig) -> subprocess.Popen:
    """A worker handed a connection whose server went between the session's hand-over and the launch."""
    ours, theirs = datagrams.pair()
    ours.close()
    env = dict(os.environ, SPLITSCOPE_FORKSERVER_FD=str(theirs.fileno()), PYTHONPATH=str(ROOT))
    worker = subprocess.Popen([sys.executable, "-m", "engine.run.worker"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env, pass_fds=(theirs.fileno(),))
    theirs.close()
    worker.stdin.write(config.to_json() + "\n")  # and stdin stays open: its end would stop the run
    worker.stdin.flush()
    return worker


def test_a_worker_whose_fork_server_is_gone_starts_its_ranks_fresh_and_they_train_as_forked_ones():
    """The worker says so and the run goes on with fresh rank processes, which end with the same parameters
    as the same run's ranks forked (the CLI's, made meanwhile with this process's fork server lent to it)."""
    config = ExperimentConfig(**TINY_DDP, steps=4)
    worker = _run_with_its_server_gone(config)
    events = []
    try:
        options = [text for key, value in dict(TINY_DDP, steps=4).items()
                   for text in (f"--{key.replace('_', '-')}", str(value))]
        _, forked = cli("run", *options, "--json", check_json=True)
        for line in worker.stdout:
            events.append(json.loads(line))
            if events[-1]["type"] == "finished":
                break
    finally:
        worker.stdin.close()
        worker.wait(30)
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert any(w.startswith("ranks start as fresh processes: ") for w in warnings), warnings
    finished = events[-1]
    assert finished["type"] == "finished" and finished["status"] == "finished", events[-3:]
    fresh = finished["summary"]
    assert forked["status"] == "finished"
    assert forked["param_norm"] == pytest.approx(fresh["param_norm"], rel=1e-6)
    assert forked["loss"]["last"] == pytest.approx(fresh["loss"]["last"], rel=1e-6)


def test_a_stop_while_the_server_has_not_answered_ends_the_launch():
    """The first run of a session waits for its server's imports; a stop meanwhile ends the wait, the run
    stops with no rank, and the worker closes its connection (what it asked for is then never served)."""
    server_side, worker_side = datagrams.pair()  # a server that never answers
    config = ExperimentConfig(**TINY_DDP, steps=2)
    env = dict(os.environ, SPLITSCOPE_FORKSERVER_FD=str(worker_side.fileno()), PYTHONPATH=str(ROOT))
    worker = subprocess.Popen([sys.executable, "-m", "engine.run.worker"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                              pass_fds=(worker_side.fileno(),))
    worker_side.close()
    try:
        worker.stdin.write(config.to_json() + "\n")
        worker.stdin.flush()
        request, fds = datagrams.receive(server_side)  # the worker asks for rank 0, and waits
        for fd in fds:
            os.close(fd)
        assert request["op"] == "spawn" and request["title"] == "(rank 0 of 2 on cpu:0)"
        worker.stdin.write("stop\n")
        worker.stdin.flush()
        events = [json.loads(line) for line in worker.stdout]
        assert datagrams.receive(server_side) is None  # closed, with nothing more asked
    finally:
        worker.stdin.close()
        worker.wait(30)
        server_side.close()
    launched = next(e for e in events if e["type"] == "launched")
    assert launched["pids"] == {} and events[-1]["status"] == "stopped", events


def test_what_torchs_imports_set_may_come_back_in_a_request(server, tmp_path):
    """A process that imported torch's pipelining has TORCHINDUCTOR_CACHE_DIR in its environment (the import
    sets it); its requests carry it, whether the server started with another value or none (it depends on
    whether the test process imported torch before the server started): served, with the request's value."""
    child = start(server.connection, "forked_probe", cwd=tmp_path,
                  env=probe_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor")))
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert json.loads(out)["env"]["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
