"""The store process: the app's SQLite connections, in a process that opens no other file.

``python -m engine.store`` (started by ``engine.store.client``). On Linux a
process loses every POSIX lock it holds on a file when it closes *any*
descriptor of that file, and SQLite's locks are such locks: a file dialog that
sniffed the store's type, an export, anything in the app's process that opened
and closed the store's file, silently dropped them, and another process then
checkpointed and deleted the log under the app's connection (docs/store.md).
Here nothing but SQLite ever opens the store's files.

The owner holds one end of a socketpair (the control socket, descriptor
``SPLITSCOPE_STORE_CONTROL_FD``). Each store it opens is a new socketpair whose
other end comes over the control socket (SCM_RIGHTS); a thread here serves it
with a ``Store`` of its own, one request at a time: ``(method, args, kwargs)``
pickled, answered ``("ok", value)`` or ``("error", exception)``; ``open`` takes the path and
the pid of the process whose runs it records (``owner_pid``). A connection's
end closes its store; the control socket's end (the owner exited, however it
died) ends the process once every connection's last request is done, so no
transaction is ever cut in half.
"""
from __future__ import annotations

import os
import pickle
import signal
import socket
import sqlite3
import threading
from multiprocessing.connection import Connection

from engine.store.database import Store

CONTROL_ENV = "SPLITSCOPE_STORE_CONTROL_FD"
PUBLIC = frozenset(name for name in dir(Store) if not name.startswith("_") and callable(getattr(Store, name)))
PUBLIC -= {"close"}   # a connection's end closes its store


def serve_connection(conn: Connection) -> None:
    store = None
    try:
        while True:
            try:
                method, args, kwargs = conn.recv()
            except (EOFError, OSError):
                return
            try:
                if method == "open":
                    store = Store(*args)
                    value = str(store.path)
                elif store is None or method not in PUBLIC:
                    raise sqlite3.ProgrammingError(f"the store process has no {method!r} here")
                else:
                    value = getattr(store, method)(*args, **kwargs)
                answer = ("ok", value)
            except Exception as exc:  # every failure goes back to the caller, whose thread raises it
                answer = ("error", exc)
            try:
                try:
                    conn.send(answer)
                except (pickle.PicklingError, TypeError, AttributeError):  # an exception pickle cannot carry
                    conn.send(("error", sqlite3.Error(f"{type(answer[1]).__name__}: {answer[1]}")))
            except (OSError, ValueError):
                return
    finally:
        conn.close()
        if store is not None:
            store.close()


def main() -> int:
    # A Ctrl-C in the app's terminal reaches its whole process group: the app finishes its runs and its
    # stores, and this process ends when the app does, not before.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=int(os.environ.pop(CONTROL_ENV)))
    threads: list[threading.Thread] = []
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 16, 1, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            break
        if not fds:
            break   # the owner is gone
        thread = threading.Thread(target=serve_connection, args=(Connection(fds[0]),), daemon=True,
                                  name=f"store-{len(threads)}")
        thread.start()
        threads = [t for t in threads if t.is_alive()] + [thread]   # one a store opened: most end soon
    for thread in threads:   # the owner's end closed their connections too: each ends after its request
        thread.join()
    return 0
