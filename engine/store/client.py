"""Opening the run store: here (a ``Store``), or in the store process (a ``RemoteStore``).

``open_store(path)`` is how every caller opens the store. In the CLI and the
engine it is a ``Store`` on a connection of this process. A process that
cannot promise never to open the store's files otherwise (the app: Qt's file
dialogs read files to learn their type, libraries open what they like) calls
``serve_from_child()`` first; from then on ``open_store`` returns a
``RemoteStore``, whose every call runs in the store process
(``engine/store/server.py``), started once and shared by the whole process.
docs/store.md says why.

A ``RemoteStore`` has the ``Store``'s methods and raises what they raise
(``sqlite3.Error`` and its kinds, ``StoreDamaged``). If the store process is
gone, the call raises ``StoreUnavailable`` (an ``sqlite3.OperationalError``,
so callers that handle a full disk handle it too), and the next call starts
a new process. A store whose process was replaced while it was idle (another
store's call started the new one) opens on the new one at its next call: none
of its requests was in flight. A writer that must lose nothing re-sends what
was not acknowledged, through ``StoreRestarts`` (the app's runs:
engine/run/session.py).
"""
from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar

from engine.environment import ROOT, with_project_path
from engine.store.database import Store, default_path
from engine.store.server import CONTROL_ENV, PUBLIC

T = TypeVar("T")
_serve_from_child = False
ENDING_S = 5.0   # how long a store process whose socket closed may take to be reaped


class StoreUnavailable(sqlite3.OperationalError):
    """The store process ended (or could not start): this call did not reach the store."""


def serve_from_child(on: bool = True) -> None:
    """From now on (or no longer), ``open_store`` in this process opens the store in the store process."""
    global _serve_from_child
    _serve_from_child = on


def open_store(path: str | os.PathLike | None = None) -> Store | RemoteStore:
    return RemoteStore(path) if _serve_from_child else Store(path)


class _StoreProcess:
    """The one store process of this process, started on first use and again if it ended."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self.generation = 0   # how many were started: a connection to an earlier one is to a process that ended

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def ensure_started(self) -> None:
        with self._lock:
            self._start_if_ended()

    def connect(self) -> tuple[Connection, int]:
        """A connection to the store process, and its generation."""
        try:
            with self._lock:
                self._start_if_ended()
                try:
                    return self._hand_over(), self.generation
                except OSError:
                    # Killed as we called: its sockets closed before it could be reaped. Once it is, a new one.
                    self._proc.wait(ENDING_S)
                    self._start_if_ended()
                    return self._hand_over(), self.generation
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StoreUnavailable(f"the store process could not be reached: {exc}") from exc

    def _hand_over(self) -> Connection:
        mine, theirs = socket.socketpair()
        try:
            socket.send_fds(self._control, [b"c"], [theirs.fileno()])
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        return Connection(mine.detach())

    def _start_if_ended(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        if self._control is not None:
            self._control.close()
        if self._proc is not None:
            self._proc.wait()
        control, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = with_project_path(**{CONTROL_ENV: str(child_end.fileno())})
        try:
            # Its own session: a signal to the app's terminal group must not end it before the app's
            # stores are closed; it ends when the control socket does (the app exited, however).
            self._proc = subprocess.Popen([sys.executable, "-m", "engine.store"], cwd=ROOT, env=env,
                                          pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        finally:
            child_end.close()
        self._control = control
        self.generation += 1


_process = _StoreProcess()


def start_store_process() -> None:
    """Start the store process now (its imports overlap the caller's), if it is not running."""
    try:
        _process.ensure_started()
    except OSError:
        pass   # the first open says why


def store_process_pid() -> int | None:
    """The store process's pid while it runs (tests leave it alive between tests, as the fork server)."""
    return _process.pid()


class RemoteStore:
    """A ``Store`` whose connection lives in the store process. Use from one thread, as a ``Store``."""

    def __init__(self, path: str | os.PathLike | None = None):
        self._conn: Connection | None = None
        self._generation = 0
        wanted = Path(path) if path is not None else default_path()   # this process's SPLITSCOPE_DB
        self.path = Path(os.path.abspath(wanted))
        self._opened = False
        try:
            self._call("open", str(self.path), os.getpid())
        except BaseException:
            self._drop()
            raise

    def _call(self, method: str, *args, **kwargs):
        if self._conn is not None and self._generation != _process.generation:
            self._drop()   # its process was replaced while this store was idle: nothing of ours was lost
        if method != "open" and not self._opened:   # a connection that broke: open again on a new one
            self._call("open", str(self.path), os.getpid())
        if self._conn is None:
            self._conn, self._generation = _process.connect()
        try:
            self._conn.send((method, args, kwargs))
            status, value = self._conn.recv()
        except (OSError, EOFError) as exc:
            self._drop()
            raise StoreUnavailable(f"the store process ended during {method}: {exc or type(exc).__name__}") from exc
        if status == "error":
            raise value
        if method == "open":
            self._opened = True
        return value

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn, self._opened = None, False

    def __getattr__(self, name: str):
        if name not in PUBLIC:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class StoreRestarts:
    """Writes that ride through the store process's end: ``write()``; if the process ended during it (the call
    raised StoreUnavailable), ``again()`` (or ``write``), which the store sends to a new one. ``again`` sends what
    the store had not acknowledged, in a form that stores nothing twice, for the write cut short may have
    committed. ``on_restart`` is called once such a write is stored, or once a write finds the process replaced
    since the last (another store's call found it ended while this writer had nothing in flight). More than
    ``limit`` ends in ``window_s`` seconds is a store process that cannot live: the last StoreUnavailable is
    raised, saying so, and the writer fails as on a full disk."""

    def __init__(self, on_restart: Callable[[], object] | None = None, limit: int = 3, window_s: float = 60.0):
        self.on_restart, self.limit, self.window_s = on_restart, limit, window_s
        self._ends: list[float] = []   # when the process ended under a write (monotonic)
        self._generation: int | None = None   # the store process's at the last write

    def write(self, write: Callable[[], T], again: Callable[[], T] | None = None) -> T:
        """What ``write`` (or ``again``) returned."""
        restarted = False
        while True:
            try:
                value = write()
            except StoreUnavailable as exc:
                now = time.monotonic()
                self._ends = [t for t in self._ends if now - t < self.window_s] + [now]
                if len(self._ends) > self.limit:
                    ended = f"it ended {len(self._ends)} times in {self.window_s:.0f} s"
                    raise StoreUnavailable(f"{exc} ({ended})") from exc
                restarted, write = True, again or write
                continue
            replaced = self._generation not in (None, _process.generation)
            self._generation = _process.generation
            if (restarted or replaced) and self.on_restart is not None:
                self.on_restart()
            return value
