"""ChildProcess: a helper that imports torch (``python -m MODULE``), driven from the event loop.

Forked by this process's fork server (engine.forkserver) when it has one: torch is imported there already, so
the child is up in a tenth of a second and shares the server's memory. Without a server, or when it refuses, a
fresh interpreter starts instead, as QProcess would start one. The fork may wait for the server's own imports
(seconds after the app started), so it is asked for on a thread; the child's output then comes through socket
notifiers on its pipes, on the UI thread. Nothing here blocks the window but ``wait``, which says how long.

The child has a connection to the server of its own: closing it (``kill``, or this process dying) makes the
server end the child, so no helper outlives the window.
"""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from PySide6 import QtCore

from app.services.thread_inbox import ThreadInbox

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is in app/services/)
STDERR_KEPT = 64 * 1024                     # the end of a child's stderr, for the message when it fails


class ChildProcess(QtCore.QObject):
    sigStdout = QtCore.Signal(bytes)        # what the child wrote, as it comes
    sigFinished = QtCore.Signal(int, str)   # its exit status (-N: signal N), the end of its stderr
    sigFailedToStart = QtCore.Signal(str)

    def __init__(self, module: str, argv: list[str] | tuple[str, ...] = (), env: dict[str, str] | None = None,
                 title: str = "", cwd: str | Path = ROOT, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.module, self.argv, self.title, self.cwd = module, list(argv), title, cwd
        self.env = dict(os.environ if env is None else env)
        self._inbox = ThreadInbox(self)
        self._inbox.sigItems.connect(self._on_launched)
        self._cancel = threading.Event()   # ``end`` was called: a child that starts after it is killed at once
        self._lock = threading.Lock()      # between the starting thread and ``end``
        self._started = None         # (process, connection) as the starting thread left them
        self._proc = None            # a Popen or an engine.forkserver ForkedProcess, once started
        self._connection = None      # the child's own connection to the fork server, if forked
        self._unsent = bytearray()   # written before the child was up
        self._input_closed = False
        self._notifiers: dict[int, QtCore.QSocketNotifier] = {}
        self._stderr = bytearray()
        self._poll = QtCore.QTimer(self, interval=20)
        self._poll.timeout.connect(self._check_exit)
        self.finished = False

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        threading.Thread(target=self._launch, name=f"start-{self.module}", daemon=True).start()

    def _launch(self) -> None:
        """On a thread: fork through the server (waiting for its imports if need be), else start afresh."""
        from engine import forkserver
        connection = forkserver.own_connection()
        try:
            try:
                proc = forkserver.start_process(self.module, env=self.env, cwd=self.cwd, argv=self.argv,
                                                connection=connection, title=self.title, cancel=self._cancel)
            except forkserver.ForkServerError:  # gone, refused or cancelled: nothing of ours is left with it
                connection.close()
                connection = None
                if self._cancel.is_set():
                    return
                proc = forkserver.start_process(self.module, env=self.env, cwd=self.cwd, argv=self.argv)
        except Exception as exc:  # noqa: BLE001 - said in the window, not lost on a thread
            if connection is not None:
                connection.close()
            self._inbox.put(("failed", f"could not start python -m {self.module}: {type(exc).__name__}: {exc}"))
            return
        with self._lock:
            self._started = (proc, connection)
            ended = self._cancel.is_set()
        if ended:  # ended while it started: the window may be gone, so not through the event loop
            _release(proc, connection, kill=True)
            return
        self._inbox.put(("started",))

    def _on_launched(self, items: list) -> None:
        for item in items:
            if item[0] == "failed":
                if not self._cancel.is_set():
                    self.sigFailedToStart.emit(item[1])
                continue
            with self._lock:
                if self._cancel.is_set():
                    return  # ended meanwhile: ``end`` released it
                proc, self._connection = self._started
                self._proc = proc
            for stream in (proc.stdout, proc.stderr):
                fd = stream.fileno()
                os.set_blocking(fd, False)
                notifier = QtCore.QSocketNotifier(fd, QtCore.QSocketNotifier.Type.Read, self)
                notifier.activated.connect(lambda *_, s=stream: self._read(s))  # (socket, type)
                self._notifiers[fd] = notifier
            if self._unsent:
                self._send(bytes(self._unsent))
                self._unsent.clear()
            if self._input_closed:
                self._close_stdin()

    # -- input ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """To the child's stdin; kept until it is up. A child that is gone reads nothing: its end says why."""
        if self._input_closed:
            return
        if self._proc is None:
            self._unsent += data
        else:
            self._send(data)

    def _send(self, data: bytes) -> None:
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def close_input(self) -> None:
        """EOF on the child's stdin (now, or once it is up)."""
        self._input_closed = True
        if self._proc is not None:
            self._close_stdin()

    def _close_stdin(self) -> None:
        try:
            self._proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass

    # -- output and the end ----------------------------------------------------------------
    def _read(self, stream) -> None:
        if self.finished:
            return
        fd = stream.fileno()
        chunks = []
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self._notifiers.pop(fd).setEnabled(False)
                break
            chunks.append(chunk)
        data = b"".join(chunks)
        if stream is self._proc.stdout:
            if data:
                self.sigStdout.emit(data)
        else:
            self._stderr += data
            del self._stderr[:-STDERR_KEPT]
        if not self._notifiers:  # both streams at their end: the child is exiting
            self._check_exit()

    def _check_exit(self) -> None:
        if self.finished:
            return
        code = self._proc.poll()
        if code is None:
            self._poll.start()   # the streams closed a moment before the process ended
            return
        self._poll.stop()
        self.finished = True
        _release(self._proc, self._connection, kill=False)
        self.sigFinished.emit(code, self._stderr.decode("utf-8", "replace"))

    # -- control -------------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL the child (a crash, as the user would see one: sigFinished follows)."""
        if self._proc is not None and not self.finished:
            self._proc.kill()

    def end(self, grace_s: float) -> None:
        """EOF on stdin, ``grace_s`` for the child to exit by itself, then SIGKILL; its pipes and connection
        are let go, and no signal comes after. Blocks the caller up to ``grace_s`` plus a kill's two
        seconds. A child still starting is killed by its starting thread as soon as it is up."""
        with self._lock:
            self._cancel.set()
            started = self._started
        self._poll.stop()
        for notifier in self._notifiers.values():
            notifier.setEnabled(False)
        self._notifiers.clear()
        if started is None or self.finished:
            return
        self.finished = True
        proc, connection = started
        try:
            proc.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
        try:
            proc.wait(grace_s)
            exited = True
        except subprocess.TimeoutExpired:
            exited = False
        _release(proc, connection, kill=not exited)


def _release(proc, connection, kill: bool) -> None:
    """Kill ``proc`` if asked (and reap it, two seconds at most), close its pipes and its server connection."""
    if kill:
        proc.kill()
        try:
            proc.wait(2.0)
        except subprocess.TimeoutExpired:
            pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            stream.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
    if connection is not None:
        connection.close()  # the server ends whatever of ours is left
