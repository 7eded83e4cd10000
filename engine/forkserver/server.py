"""The fork server (``python -m engine.forkserver OWNER_PID``): torch and the engine imported once, a child
forked per request.

Its standard input is its owner's end of a socketpair (engine/forkserver/client.py
``ForkServer``): the owner asks for children there and hands over connections for
other processes of its run (a worker). A connection that closes takes its children
with it (SIGKILL), and what it still had queued is not served: a worker killed
mid-launch leaves no rank. When the owner's end closes, or the owner dies (the
parent-death signal, from the first line on), every child and the server end;
children get the parent-death signal from this process, whose one thread forks
them, so they end with it too. The server imports and forks, nothing else: no torch
op, no CUDA, no thread (it checks, and refuses to serve otherwise), so every child
starts as clean as a fresh interpreter.
"""
from __future__ import annotations

import dataclasses
import gc
import importlib
import os
import select
import signal
import socket
import sys

from engine.forkserver import datagrams
from engine.forkserver.child import become
from engine.parent_death import die_with_parent
from engine.wire import forkserver as messages
from engine.wire.forkserver import Client, Exited, Ping, Pong, Refused, Signal, Spawn, Spawned

# What every rank or validation child imports: about 2.5-3 s of a fresh process's start here, paid once. The
# entry modules themselves (engine.run.rank, engine.run.validate) are run afresh in each child, as `python -m` would.
# torch._dynamo is among them: DDP's construction imports it, and a single device's rank did too (1.0-1.2 s in
# each rank when the server had not). What only some runs need (pipelining, FSDP, tensor parallel, torchvision:
# about 1 s more) is imported when a request first names it (Spawn.imports: the run's strategy's and model's), so
# a command that trains an MLP never pays for them.
PRELOAD = ("torch", "torch.distributed", "torch._dynamo", "torch.profiler", "engine.run.loop", "engine.models.build",
           "engine.planner.planning", "engine.strategies", "engine.strategies.ddp_executor",
           "engine.strategies.pipeline.in_process_stages", "engine.strategies.pipeline.in_process_traced_stages",
           "engine.models.tracing")
WHAT_SOME_RUNS_IMPORT = ("torch.distributed.pipelining", "torch.distributed.fsdp", "torch.distributed.tensor.parallel",
                         "torchvision", "engine.strategies.data_parallel_executors",
                         "engine.strategies.pipeline.scheduled_stages", "engine.strategies.sharded_executor")
"""The rest of what a child may import: what a long-lived owner (the app) asks its server for with its first child."""
# Variables read once, by the interpreter's start or by torch's and its libraries' loading: a child whose
# environment differs in one of them would not be what `python -m` starts, so it is refused (and started
# fresh). Those the child sets up itself are left out; the thread counts are every rank's (engine/environment.py).
READ_AT_START = ("PYTHON", "TORCH", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "LD_")
SET_UP_BY_THE_CHILD = {"PYTHONPATH", "PYTHONUNBUFFERED", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                       "OPENBLAS_NUM_THREADS",
                       # torch reads it at each use (torch/_inductor/runtime/cache_dir_utils.py: cache_dir()), from
                       # the child's environment; importing pipelining sets it, so it is in the server's or not
                       # depending on whether its owner imported torch first.
                       "TORCHINDUCTOR_CACHE_DIR"}


class Server:
    """``started_with``: the environment the server started with (before its imports); ``set_by_imports``:
    what the imports added to it, which a fresh process importing the same would have too."""

    def __init__(self, owner: socket.socket, started_with: dict[str, str], set_by_imports: dict[str, str]):
        self.owner: socket.socket | None = owner
        self.connections: dict[int, socket.socket] = {}
        self.children: dict[int, socket.socket] = {}  # pid -> the connection that asked for it
        self.poller = select.poll()
        self.started_with = _read_at_start(started_with)
        self.set_by_imports = set_by_imports
        self.unsafe: str | None = None   # why forking became unsafe after a request's imports (_import)
        self.failed: set[str] = set()    # what a request named that did not import: not tried again
        self._wake_read, wake_write = os.pipe()
        for fd in (self._wake_read, wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up byte is what counts
        self.poller.register(self._wake_read, select.POLLIN)
        self._add(owner)

    def _add(self, sock: socket.socket) -> None:
        self.connections[sock.fileno()] = sock
        self.poller.register(sock.fileno(), select.POLLIN)

    def serve(self) -> int:
        while self.owner is not None:
            for fd, events in self.poller.poll():
                if fd == self._wake_read:
                    while _drain(fd):
                        pass
                elif fd in self.connections:
                    if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                        # Gone: what it still had queued asks for processes nobody will drive.
                        self._drop(self.connections[fd])
                    else:
                        self._read(self.connections[fd])
            self._reap()
        self._end_all()
        return 0

    # ---- requests ------------------------------------------------------------------------------------------
    def _read(self, sock: socket.socket) -> None:
        try:
            got = datagrams.receive(sock)
        except datagrams.WireError:
            got = None
        if got is None:
            self._drop(sock)
            return
        data, fds = got
        try:
            message = messages.decode(data)
        except messages.MessageError as exc:
            _close(fds)
            if exc.tag == "spawn":   # its asker waits for an answer
                self._tell(sock, Refused(exc.ident, f"garbled: {exc.detail}"))
            return
        try:
            self._handle(sock, message, fds)
        except Exception:   # one connection's odd request must not end the server, which serves every other
            self._drop(sock)

    def _handle(self, sock: socket.socket, message: messages.Message | None, fds: list[int] | None) -> None:
        match message:
            case Client() if fds is not None and len(fds) == 1:
                # A connection for another process: the owner's worker, or a process that a holder of a connection
                # started (a command run by a script that owns a server). Each is its own: its end takes its
                # children.
                try:
                    self._add(socket.socket(fileno=fds[0]))
                except OSError:   # not a socket
                    os.close(fds[0])
            case Spawn():
                self._spawn(sock, message, fds)
            case Ping():   # the owner asks whether its imports are done: this answer says they are
                _close(fds)
                self._tell(sock, Pong())   # one it cannot take is a connection that stopped reading: dropped
            case Signal(pid=pid, signal=number):
                _close(fds)
                # Only a child not yet reaped: its pid cannot have been reused by another process.
                if self.children.get(pid) is sock:
                    try:
                        os.kill(pid, number)
                    except (ProcessLookupError, ValueError, OverflowError, OSError):
                        pass
            case _:
                _close(fds)

    def _spawn(self, sock: socket.socket, request: Spawn, fds: list[int] | None) -> None:
        problem = (f"more than {datagrams.MAX_FDS} descriptors" if fds is None else
                   _request_problem(request, fds) or self._import(request.imports)
                   or self._environment_problem(request.env))
        pid = None
        if problem is None:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            server_pid = os.getpid()
            try:
                pid = os.fork()
            except OSError as exc:
                problem = f"fork failed: {exc}"
            if pid == 0:
                become(dataclasses.replace(request, env={**self.set_by_imports, **request.env}), fds, server_pid,
                       list(self.connections.values()))
        _close(fds)
        if pid:
            self.children[pid] = sock
        self._tell(sock, Spawned(request.id, pid) if pid else Refused(request.id, problem))

    def _import(self, names: list[str]) -> str | None:
        """The modules a request names that are not imported yet, imported here as PRELOAD's are (one that fails is
        the child's to say, as a fresh process would); why no child may be forked after them, or None."""
        if self.unsafe is not None:   # an earlier request's import made forking unsafe: for good
            return self.unsafe
        new = [name for name in names if name not in sys.modules and name not in self.failed]
        if not new:
            return None
        before = dict(os.environ)
        self.failed.update(_import_each(new))
        self.unsafe = unsafe_to_fork()
        if self.unsafe is not None:
            return self.unsafe
        self.set_by_imports.update({k: v for k, v in os.environ.items() if before.get(k) != v})
        _freeze()
        return None

    def _environment_problem(self, env: dict[str, str]) -> str | None:
        # What the imports set themselves is read later, from the environment the child gets (a process that
        # imported torch before its session started, as a test's does, asks with what torch set in it).
        differ = sorted((name, value) for name, value in
                        set(_read_at_start(env).items()) ^ set(self.started_with.items())
                        if name not in self.set_by_imports)
        if not differ:
            return None
        names = sorted({name for name, _ in differ})
        return (f"{', '.join(names)} differ from the fork server's, and are read when the interpreter and torch "
                "start")

    def _tell(self, sock: socket.socket, message: messages.Message) -> None:
        if sock.fileno() < 0:  # dropped already
            return
        try:
            # Never waiting: one connection that stopped reading (hundreds of messages behind) must not stall
            # the others; it is dropped, with its children.
            datagrams.send(sock, messages.encode(message), wait=False)
        except datagrams.WireError:
            self._drop(sock)

    # ---- ends ----------------------------------------------------------------------------------------------
    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            asker = self.children.pop(pid, None)
            if asker is not None:
                self._tell(asker, Exited(pid, os.waitstatus_to_exitcode(status)))

    def _drop(self, sock: socket.socket) -> None:
        fd = sock.fileno()
        if fd < 0 or self.connections.get(fd) is not sock:
            return
        del self.connections[fd]
        self.poller.unregister(fd)
        sock.close()
        if sock is self.owner:
            self.owner = None
        for pid, asker in list(self.children.items()):
            if asker is sock:
                _kill(pid)

    def _end_all(self) -> None:
        for sock in list(self.connections.values()):
            self._drop(sock)
        for pid in list(self.children):
            _kill(pid)
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            self.children.pop(pid, None)


def _read_at_start(env) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(READ_AT_START) and k not in SET_UP_BY_THE_CHILD}


def _close(fds: list[int] | None) -> None:
    for fd in fds or ():
        os.close(fd)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, OSError):
        pass


def _drain(fd: int) -> bool:
    try:
        return bool(os.read(fd, 512))
    except (BlockingIOError, OSError):
        return False


def _request_problem(request: Spawn, fds: list[int]) -> str | None:
    """What the types of its fields (engine/wire/forkserver.py) leave to check."""
    numbers = request.fds
    if not request.module:
        return "no module named"
    if not (all(n >= 0 for n in numbers) and len(set(numbers)) == len(numbers) == len(fds)
            and {0, 1, 2} <= set(numbers)):
        return "descriptors 0, 1 and 2 and one number for each descriptor sent"
    return None


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def unsafe_to_fork() -> str | None:
    """Why a child forked now would not start as a fresh interpreter does, or None."""
    if _threads() > 1:
        # A child forked beside another thread may inherit a lock that thread held, and hang on it.
        return f"{_threads()} threads after the imports"
    nvml = sys.modules.get("engine.telemetry.nvml")
    if nvml is not None and nvml.started():
        return "NVML was started by the imports (a forked child would share its handles)"
    torch = sys.modules.get("torch")
    if torch is not None:
        # torch.cuda.is_initialized() is not enough: asking whether CUDA is there (is_available,
        # device_count) already leaves a forked child unable to use it. A child says whether it could.
        pid = os.fork()
        if pid == 0:
            os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            return "CUDA was touched by the imports (a forked child could not use it)"
    return None


def _import_each(names) -> set[str]:
    """Each of ``names`` imported; those that failed."""
    failed = set()
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a child that needs it says why, as a fresh process would
            failed.add(name)
    return failed


def _freeze() -> None:
    """What the imports made lives as long as any child: out of the cyclic collector's reach, a child's full
    collection neither walks it nor copies its pages (here 290 ms and 84 MB of copied pages a child without
    this; 0 with it)."""
    gc.collect()
    gc.freeze()


def main() -> int:
    """``python -m engine.forkserver OWNER_PID [room for titles]``; stdin: the owner's socketpair end."""
    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        print("usage: python -m engine.forkserver OWNER_PID, its stdin a socketpair's end: "
              "engine/forkserver/client.py ForkServer starts it", file=sys.stderr)
        return 2
    die_with_parent(expected_parent=int(sys.argv[1]))  # at once, mid-import too
    owner = socket.socket(fileno=os.dup(0))
    started_with = dict(os.environ)
    _import_each(PRELOAD)
    problem = unsafe_to_fork()
    if problem is not None:
        print(f"fork server: {problem}; not forking (clients start fresh processes)", file=sys.stderr)
        return 1
    _freeze()
    set_by_imports = {k: v for k, v in os.environ.items() if started_with.get(k) != v}
    return Server(owner, started_with, set_by_imports).serve()
