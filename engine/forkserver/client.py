"""The fork server's side in the processes that use it: its owner (``ForkServer``, one a process:
``shared()``), a connection to it (``Connection``, engine/forkserver/connection.py: the owner's, or a worker's
handed over by its session), and the children it forks (``ForkedProcess``), which the worker's loop drives as
it would a Popen.

``start_process`` and ``run_module`` fork through the server where there is one and start a fresh interpreter
(``python -m MODULE``) where there is none, or it cannot serve: the same process either way, sooner with it.
"""
from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import time

from engine.environment import ROOT, variable, with_project_path
from engine.forkserver import datagrams
from engine.forkserver.connection import Connection, ForkServerError
from engine.wire.forkserver import Ping

TITLE_ROOM = 96            # bytes of command line kept for each child's own (engine/forkserver/title.py)
CONNECTION_ENV = "SPLITSCOPE_FORKSERVER_FD"  # a worker's connection: the descriptor its session passed it
SWITCH_ENV = "SPLITSCOPE_FORKSERVER"         # "0": no fork server; every process starts fresh


class ForkedProcess:
    """A child of the fork server, as the worker drives a Popen: pid, pipes, poll, wait, signals."""

    def __init__(self, connection: Connection, pid: int, args: list[str], stdin, stdout, stderr):
        self._connection = connection
        self.pid, self.args = pid, args
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        return self._connection.exit_code(self.pid, 0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._connection.exit_code(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return code

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            self._connection.signal(self.pid, number)

    def terminate(self) -> None:
        import signal
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: bytes | None = None, timeout: float | None = None) -> tuple[bytes, bytes]:
        """Write ``input``, read both outputs to their end, wait for the exit (subprocess.Popen.communicate)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read: dict[str, bytes] = {}

        def drain(name, stream):
            read[name] = stream.read()
            stream.close()
        readers = [threading.Thread(target=drain, args=(name, stream), daemon=True)
                   for name, stream in (("out", self.stdout), ("err", self.stderr))]
        for reader in readers:
            reader.start()
        try:
            if input:
                self.stdin.write(input)
            self.stdin.close()
        except BrokenPipeError:
            pass
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return read["out"], read["err"]


def start(connection: Connection, module: str, *, env: dict[str, str], cwd, pass_fds=(), argv=(),
          title: str = "", cancel: threading.Event | None = None, imports=()) -> ForkedProcess:
    """Fork ``python -m module`` with pipes for its standard streams and ``pass_fds`` open at their numbers;
    ``imports``: what it will import, imported by the server first (messages.Spawn)."""
    if not os.path.isdir(cwd):  # as Popen says it, before anything starts
        raise FileNotFoundError(f"no such directory: {str(cwd)!r}")
    child_in, stdin = os.pipe()
    stdout, child_out = os.pipe()
    stderr, child_err = os.pipe()
    ours = (stdin, stdout, stderr)
    try:
        pid = connection.spawn(module, env=env, cwd=cwd, argv=argv, title=title, cancel=cancel, imports=imports,
                               fds={0: child_in, 1: child_out, 2: child_err, **{fd: fd for fd in pass_fds}})
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in (child_in, child_out, child_err):
            os.close(fd)
    return ForkedProcess(connection, pid, [sys.executable, "-m", module, *argv], open(stdin, "wb"),
                         open(stdout, "rb"), open(stderr, "rb"))


def start_process(module: str, *, env: dict[str, str], cwd, pass_fds=(), connection: Connection | None = None,
                  title: str = "", cancel: threading.Event | None = None, imports=()):
    """``python -m module`` with piped standard streams: forked by ``connection``'s server when given (``title``
    after its command in ps; ``cancel``: Connection.spawn), else a fresh interpreter (subprocess.Popen).
    ForkServerError from the server is the caller's to note."""
    if connection is not None:
        return start(connection, module, env=env, cwd=cwd, pass_fds=pass_fds, title=title, cancel=cancel,
                     imports=imports)
    return subprocess.Popen([sys.executable, "-m", module], cwd=cwd, env=env, pass_fds=tuple(pass_fds),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run_module(module: str, *, input: str, env: dict[str, str], cwd, argv=(), timeout: float | None = None,
               imports=()) -> subprocess.CompletedProcess:
    """``python -m module ARGV`` with ``input`` on its stdin, to its end (subprocess.run, capturing text)."""
    server = shared()
    if server is not None:
        try:
            proc = start(server.connection, module, env=env, cwd=cwd, argv=argv, imports=imports)
        except ForkServerError:
            pass
        else:
            try:
                out, err = proc.communicate(input.encode(), timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
            return subprocess.CompletedProcess(proc.args, proc.wait(), out.decode("utf-8", "replace"),
                                               err.decode("utf-8", "replace"))
    return subprocess.run([sys.executable, "-m", module, *argv], input=input, capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


class ForkServer:
    """The fork server this process owns: started at once (torch imports meanwhile), ended by ``close`` or
    with this process.

    It ends with its owner twice over: it reads its end of the socketpair to its end, and it has the
    parent-death signal. That signal comes when the *thread* that started it ends, so a thread of its own
    starts it and lives until ``close``: a session started from a short-lived thread (the app's runs) must not
    take the server with it.
    """

    def __init__(self):
        mine, theirs = datagrams.pair()
        # libgomp and OpenBLAS read these once, when torch loads: one intra-op thread, as every rank has
        # (engine/environment.py), and no thread pool in the server.
        env = with_project_path(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        # Its own session, as the worker's: a Ctrl-C in the terminal reaches the CLI alone, which stops the run
        # in order. The last argument is room for the children's titles.
        command = [sys.executable, "-m", "engine.forkserver", str(os.getpid()), " " * TITLE_ROOM]
        self._closing = threading.Event()
        started: list = []
        ready = threading.Event()

        def own():
            try:
                started.append(subprocess.Popen(command, stdin=theirs, stdout=subprocess.DEVNULL, cwd=ROOT, env=env,
                                                start_new_session=True))
            except BaseException as exc:  # noqa: BLE001 - handed to the constructor, which raises it
                started.append(exc)
            finally:
                theirs.close()
                ready.set()
            self._closing.wait()
        threading.Thread(target=own, name="forkserver-owner", daemon=True).start()
        ready.wait()
        if isinstance(started[0], BaseException):
            mine.close()
            raise started[0]
        self._proc: subprocess.Popen = started[0]
        self.connection = Connection(mine)
        try:
            self.connection._send(Ping())   # answered once the imports are done: ``serving``
        except ForkServerError:
            pass

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc.poll() is None and not self.connection.closed

    @property
    def serving(self) -> bool:
        """Its imports are done: what it forks now starts in milliseconds (before, a request waits for them)."""
        return self.connection.serving and self.alive()

    def close(self, timeout: float = 5.0) -> None:
        """End the server and every child it still has: its owner thread ends, so the parent-death signal kills
        it (at once, mid-import too), and its children theirs."""
        self.connection.close()
        self._closing.set()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class BorrowedServer:
    """A fork server another process owns, reached through the connection it handed this one (``CONNECTION_ENV``):
    a command started by a script that owns a warm server (the tests, the GPU check) forks its validation child
    and its ranks there rather than importing torch in a server of its own."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.pid = None   # not this process's to follow
        try:
            connection._send(Ping())
        except ForkServerError:
            pass

    def alive(self) -> bool:
        return not self.connection.closed

    @property
    def serving(self) -> bool:
        return self.connection.serving and self.alive()

    def close(self, timeout: float = 5.0) -> None:
        self.connection.close()


_shared: ForkServer | BorrowedServer | None = None
_shared_lost = False   # the server ended by itself: this process starts fresh processes from then on
_shared_lock = threading.Lock()


def enabled() -> bool:
    return (variable(SWITCH_ENV, "1") != "0" and sys.platform.startswith("linux")
            and hasattr(socket, "send_fds") and hasattr(os, "fork"))


def shared() -> ForkServer | BorrowedServer | None:
    """This process's fork server, started on first use (or the one whose connection this process was handed,
    ``CONNECTION_ENV``); None where there is none (``enabled``) or it ended."""
    global _shared, _shared_lost
    with _shared_lock:
        if not enabled():
            return None
        if _shared is not None and not _shared.alive():
            _shared, _shared_lost = None, True
        if _shared is None and not _shared_lost:
            handed = worker_connection()
            try:
                _shared = BorrowedServer(handed) if handed is not None else ForkServer()
            except OSError:
                _shared_lost = True
            else:
                atexit.register(_shared.close)
        return _shared


def started() -> ForkServer | BorrowedServer | None:
    """The fork server this process started or borrowed, if it did and it is alive; never starts one."""
    server = _shared
    return server if server is not None and server.alive() else None


def hand_over_connection() -> socket.socket | None:
    """A connection to this process's fork server for a process it starts (its descriptor in ``CONNECTION_ENV``
    and ``pass_fds``; close ours once it started), or None where there is no server."""
    server = shared()
    if server is None:
        return None
    try:
        return server.connection.hand_over()
    except ForkServerError:
        return None


def shared_pid() -> int | None:
    """The pid of the fork server this process started, if one runs (tests tell it from processes left
    behind); None for one it borrowed."""
    server = _shared
    return server.pid if server is not None and server.alive() else None


def worker_connection() -> Connection | None:
    """In a worker: the connection its session handed over (``CONNECTION_ENV``), or None. The variable goes:
    the ranks' environments are made from the worker's, and the number means nothing in them."""
    fd = os.environ.pop(CONNECTION_ENV, None)
    if not fd:
        return None
    try:
        os.set_inheritable(int(fd), False)  # the worker's alone: no process it starts holds it open
        return Connection(socket.socket(fileno=int(fd)))
    except (OSError, ValueError):
        return None
