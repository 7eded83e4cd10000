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
a new process.
"""
from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from engine.environment import ROOT, with_project_path
from engine.store.database import Store, default_path
from engine.store.server import CONTROL_ENV, PUBLIC


_serve_from_child = False


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

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def ensure_started(self) -> None:
        with self._lock:
            self._start_if_ended()

    def connect(self) -> Connection:
        mine, theirs = socket.socketpair()
        try:
            with self._lock:
                self._start_if_ended()
                socket.send_fds(self._control, [b"c"], [theirs.fileno()])
        except OSError as exc:
            mine.close()
            raise StoreUnavailable(f"the store process could not be reached: {exc}") from exc
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
        wanted = Path(path) if path is not None else default_path()   # this process's SPLITSCOPE_DB
        self.path = Path(os.path.abspath(wanted))
        self._opened = False
        try:
            self._call("open", str(self.path), os.getpid())
        except BaseException:
            self._drop()
            raise

    def _call(self, method: str, *args, **kwargs):
        if method != "open" and not self._opened:   # a connection that broke: open again on a new one
            self._call("open", str(self.path), os.getpid())
        if self._conn is None:
            self._conn = _process.connect()
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

    def __enter__(self) -> "RemoteStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
