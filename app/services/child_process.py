"""ChildProcess: a helper that imports torch (``python -m MODULE``), driven from the event loop.

Forked by this process's fork server (engine.forkserver) when it has one: torch is imported there already, so
once the server is up the child is too, in a tenth of a second, and it shares the server's memory. Without a
server, or when it refuses, a fresh interpreter starts instead, as QProcess would start one. The fork may wait
for the server's own imports (seconds after the app started), so it is asked for on a thread; the child's pipes
are then non-blocking and served by socket notifiers on the UI thread: reads and writes never wait, and only
``end`` blocks, for the grace it is given.

Give it a parent (the client that drives it), or delete it on the UI thread: its connections to its own slots
make a reference cycle, and a parentless QObject left to the cyclic collector may be destroyed on whichever
thread the collector runs on, which Qt does not survive.

A forked child has a connection to the server of its own: closing it makes the server kill the child, so
``end`` need not wait for the kill, and a request that timed out leaves nothing behind.
"""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from PySide6 import QtCore

from app.services.thread_inbox import ThreadInbox

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is in app/services/)
STDERR_KEPT = 64 * 1024      # the end of a child's stderr, for the message when it fails
READ_CHUNKS = 16             # 64-KB reads per notifier activation: a flood of output cannot starve the loop
WATCH_MS = 100               # how often the process itself is asked whether it ended (its pipes may outlive it)


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
        self._started = None               # (process, connection) as the starting thread left them
        self._thread: threading.Thread | None = None
        self._proc = None                  # a Popen or an engine.forkserver ForkedProcess, once up here
        self._connection = None            # the child's own connection to the fork server, if forked
        self._unsent = bytearray()         # written and not yet taken by the pipe
        self._input_closed = False
        self._kill_asked = False
        self._readers: dict[int, QtCore.QSocketNotifier] = {}
        self._writer: QtCore.QSocketNotifier | None = None
        self._stderr = bytearray()
        self._watch = QtCore.QTimer(self, interval=WATCH_MS)
        self._watch.timeout.connect(self._check_exit)
        self.finished = False

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        self._thread = threading.Thread(target=self._launch, name=f"start-{self.module}", daemon=True)
        self._thread.start()

    def _launch(self) -> None:
        """On a thread: fork through the server (waiting for its imports if need be), else start afresh."""
        from engine import forkserver
        connection = None
        try:
            connection = forkserver.own_connection()
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
            _release(proc, connection)
            return
        self._inbox.put(("started",))

    def _on_launched(self, items: list) -> None:
        for item in items:  # one item a child: "failed" or "started"
            if item[0] == "failed":
                if not self._cancel.is_set():
                    self.sigFailedToStart.emit(item[1])
                continue
            with self._lock:
                if self._cancel.is_set():
                    continue  # ended meanwhile: ``end`` released it
                proc, self._connection = self._started
                self._proc = proc
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                os.set_blocking(stream.fileno(), False)
            for stream in (proc.stdout, proc.stderr):
                notifier = QtCore.QSocketNotifier(stream.fileno(), QtCore.QSocketNotifier.Type.Read, self)
                notifier.activated.connect(lambda *_, s=stream: self._read(s))  # (socket, type)
                self._readers[stream.fileno()] = notifier
            self._writer = QtCore.QSocketNotifier(proc.stdin.fileno(), QtCore.QSocketNotifier.Type.Write, self)
            self._writer.setEnabled(False)
            self._writer.activated.connect(lambda *_: self._flush_input())
            self._watch.start()
            self._flush_input()
            if self._kill_asked:
                self.kill()

    # -- input ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """To the child's stdin, as the pipe takes it; kept until the child is up. A child that is gone reads
        nothing: its end says why."""
        if self._input_closed:
            return
        self._unsent += data
        if self._proc is not None:
            self._flush_input()

    def close_input(self) -> None:
        """EOF on the child's stdin once what was written is in the pipe."""
        self._input_closed = True
        if self._proc is not None:
            self._flush_input()

    def _flush_input(self) -> None:
        stdin = self._proc.stdin
        if self.finished or stdin.closed:
            return
        while self._unsent:
            try:
                taken = os.write(stdin.fileno(), self._unsent)
            except BlockingIOError:
                self._writer.setEnabled(True)  # the rest when the pipe has room
                return
            except OSError:  # the child closed its end: it is ending
                self._unsent.clear()
                break
            del self._unsent[:taken]
        self._writer.setEnabled(False)
        if self._input_closed:
            _close_quietly(stdin)

    # -- output and the end ----------------------------------------------------------------
    def _read(self, stream) -> None:
        if self.finished:
            return
        self._take(stream, self._drain(stream, READ_CHUNKS))
        if not self._readers:
            self._check_exit()  # both streams at their end: the child is ending

    def _drain(self, stream, chunks: int | None) -> bytes:
        """What the pipe holds now (``chunks`` reads at most); at its end, its notifier goes."""
        fd, got = stream.fileno(), []
        while chunks is None or len(got) < chunks:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                notifier = self._readers.pop(fd, None)
                if notifier is not None:
                    notifier.setEnabled(False)
                break
            got.append(chunk)
        return b"".join(got)

    def _take(self, stream, data: bytes) -> None:
        if not data:
            return
        if stream is self._proc.stdout:
            self.sigStdout.emit(data)
        else:
            self._stderr += data
            del self._stderr[:-STDERR_KEPT]

    def _check_exit(self) -> None:
        if self.finished:
            return
        code = self._proc.poll()
        if code is None:
            return
        # Ended: what its pipes still hold, even where a process it started keeps them open.
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream.fileno() in self._readers:
                self._take(stream, self._drain(stream, None))
        self._stop_watching()
        self.finished = True
        _release(self._proc, self._connection, wait_s=0.0)
        self.sigFinished.emit(code, self._stderr.decode("utf-8", "replace"))

    def _stop_watching(self) -> None:
        self._watch.stop()
        for notifier in [*self._readers.values(), self._writer]:
            if notifier is not None:
                notifier.setEnabled(False)
        self._readers.clear()

    # -- control -------------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL the child (a crash, as the user would see one: sigFinished follows), at once or as soon as
        it is up."""
        if self._proc is None:
            self._kill_asked = True
        elif not self.finished:
            self._proc.kill()

    def end(self, grace_s: float) -> None:
        """EOF on stdin, ``grace_s`` for the child to exit by itself, then SIGKILL; its pipes and connection
        are let go, and no signal comes after. A forked child is killed by closing its connection (the
        server's work, not waited for); a fresh one is reaped here, two seconds at most. A child still
        starting is killed by its starting thread as soon as it is up."""
        with self._lock:
            self._cancel.set()
            started = self._started
        self._stop_watching()
        if started is None or self.finished:
            return
        self.finished = True
        proc, connection = started
        _close_quietly(proc.stdin)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
        _release(proc, connection)


def _release(proc, connection, wait_s: float = 2.0) -> None:
    """End ``proc`` if it still runs and let go of its pipes: a forked child's connection closes (the server
    kills what is left of it and reaps it); a fresh one is killed and reaped, ``wait_s`` at most."""
    if connection is not None:
        connection.close()
    elif proc.poll() is None:
        proc.kill()
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            pass  # Popen reaps it later
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        _close_quietly(stream)


def _close_quietly(stream) -> None:
    try:
        stream.close()
    except (BrokenPipeError, ValueError, OSError):
        pass
