"""The fork server (``python -m engine.forkserver``): torch and the engine imported once, a child forked per
request.

Its standard input is its owner's end of a socketpair (engine/forkserver/client.py
``ForkServer``): the owner asks for children there and hands over connections for
other processes of its run (a worker); when the owner's end closes, or the owner
dies (the parent-death signal, from the first line on), the owner is gone, and so
is every child and the server. A connection that closes takes its
children with it (SIGKILL): a worker killed mid-run leaves no rank. Children get
the parent-death signal from this process, whose one thread forks them, so they
end with it too. The server imports and forks, nothing else: no torch op, no CUDA,
no thread (it checks), so every child starts as clean as a fresh interpreter.
"""
from __future__ import annotations

import importlib
import os
import select
import signal
import socket
import sys

from engine.forkserver import wire
from engine.forkserver.child import become
from engine.parent_death import die_with_parent

# What a rank or the validation child imports: about 3.5 s of a fresh process's start here, paid once.
PRELOAD = ("torch", "torch.distributed", "torch.distributed.pipelining", "torch.distributed.fsdp",
           "torch.distributed.tensor.parallel", "torch.profiler", "torchvision", "engine.rank", "engine.loop",
           "engine.validate", "engine.models.build", "engine.planning", "engine.strategies.ddp_executor",
           "engine.strategies.data_parallel_executors", "engine.strategies.scheduled_stages",
           "engine.strategies.in_process_stages", "engine.strategies.in_process_traced_stages",
           "engine.strategies.sharded_executor")
SEND_TIMEOUT_S = 5.0  # a connection whose reader stopped reading for this long is dropped, with its children


class Server:
    def __init__(self, owner: socket.socket):
        self.owner: socket.socket | None = owner
        self.connections: dict[int, socket.socket] = {}
        self.children: dict[int, int] = {}  # pid -> the connection that asked for it
        self.poller = select.poll()
        self._wake_read, wake_write = os.pipe()
        for fd in (self._wake_read, wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up byte is what counts
        self.poller.register(self._wake_read, select.POLLIN)
        self._add(owner)

    def _add(self, sock: socket.socket) -> None:
        sock.settimeout(SEND_TIMEOUT_S)
        self.connections[sock.fileno()] = sock
        self.poller.register(sock.fileno(), select.POLLIN)

    def serve(self) -> int:
        while self.owner is not None:
            for fd, _ in self.poller.poll():
                if fd == self._wake_read:
                    while _drain(fd):
                        pass
                elif fd in self.connections:
                    self._read(fd)
            self._reap()
        self._end_all()
        return 0

    # ---- requests ------------------------------------------------------------------------------------------
    def _read(self, fd: int) -> None:
        sock = self.connections[fd]
        try:
            got = wire.receive(sock)
        except wire.WireError:
            got = None
        if got is None:
            self._drop(fd)
            return
        message, fds = got
        op = message.get("op")
        if op == "client" and self.owner is not None and fd == self.owner.fileno() and len(fds) == 1:
            self._add(socket.socket(fileno=fds[0]))
        elif op == "spawn":
            self._spawn(fd, message, fds)
        elif op == "signal":
            for received in fds:
                os.close(received)
            pid, number = message.get("pid"), message.get("signal")
            # Only a child not yet reaped: its pid cannot have been reused by another process.
            if self.children.get(pid) == fd and isinstance(number, int):
                try:
                    os.kill(pid, number)
                except (ProcessLookupError, ValueError, OSError):
                    pass
        else:
            for received in fds:
                os.close(received)

    def _spawn(self, fd: int, request: dict, fds: list[int]) -> None:
        problem = _request_problem(request, fds)
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
                become(request, fds, server_pid, list(self.connections.values()))
        for received in fds:
            os.close(received)
        if pid:
            self.children[pid] = fd
        self._tell(fd, {"op": "spawned", "id": request.get("id"), "pid": pid} if pid else
                   {"op": "refused", "id": request.get("id"), "error": problem})

    def _tell(self, fd: int, message: dict) -> None:
        sock = self.connections.get(fd)
        if sock is None:
            return
        try:
            wire.send(sock, message)
        except wire.WireError:
            self._drop(fd)

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
                self._tell(asker, {"op": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)})

    def _drop(self, fd: int) -> None:
        sock = self.connections.pop(fd, None)
        if sock is None:
            return
        self.poller.unregister(fd)
        sock.close()
        if self.owner is not None and self.owner is sock:
            self.owner = None
        for pid, asker in list(self.children.items()):
            if asker == fd:
                _kill(pid)

    def _end_all(self) -> None:
        for fd in list(self.connections):
            self._drop(fd)
        for pid in list(self.children):
            _kill(pid)
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            self.children.pop(pid, None)


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


def _request_problem(request: dict, fds: list[int]) -> str | None:
    numbers = request.get("fds")
    env = request.get("env")
    if not isinstance(request.get("module"), str) or not request["module"]:
        return "no module named"
    if not (isinstance(numbers, list) and all(isinstance(n, int) and n >= 0 for n in numbers)
            and len(set(numbers)) == len(numbers) == len(fds) and {0, 1, 2} <= set(numbers)):
        return "descriptors 0, 1 and 2 and one number for each descriptor sent"
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        return "an environment of strings"
    if not isinstance(request.get("cwd"), str) or not isinstance(request.get("argv", []), list):
        return "a working directory and a list of arguments"
    if not isinstance(request.get("title", ""), str):
        return "a title that is a string"
    return None


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def main() -> int:
    """``python -m engine.forkserver OWNER_PID [room for titles]``; stdin: the owner's socketpair end."""
    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        print("usage: python -m engine.forkserver OWNER_PID, its stdin a socketpair's end: "
              "engine/forkserver/client.py ForkServer starts it", file=sys.stderr)
        return 2
    die_with_parent(expected_parent=int(sys.argv[1]))  # at once, mid-import too
    owner = socket.socket(fileno=os.dup(0))
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a child that needs it says why, as a fresh process would
            pass
    problem = _unsafe_to_fork()
    if problem is not None:
        print(f"fork server: {problem}; not forking (clients start fresh processes)", file=sys.stderr)
        return 1
    return Server(owner).serve()


def _unsafe_to_fork() -> str | None:
    """Why a child forked now would not start as a fresh interpreter does, or None."""
    if _threads() > 1:
        # A child forked beside another thread may inherit a lock that thread held, and hang on it.
        return f"{_threads()} threads after the imports"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialized by the imports (a forked child could not use it)"
    nvml = sys.modules.get("engine.telemetry.nvml")
    if nvml is not None and nvml.started():
        return "NVML was started by the imports (a forked child would share its handles)"
    return None
