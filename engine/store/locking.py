"""How the store's connections live with SQLite's locks (docs/store.md): how long a write waits for another
process's (``BUSY_TIMEOUT_S``), an action tried again while SQLite says the database is busy
(``until_unlocked``), and the write transaction that a crash never leaves half done (``Transaction``).

Its own module because none of it knows the store's tables or records: ``database.py`` (``Store``) opens,
writes and probes through it, and the rest of that file is the schema's queries.
"""
from __future__ import annotations

import sqlite3
import time

BUSY_TIMEOUT_S = 30.0
"""How long a write waits for another process's write to end. Several runs recording into one store on a
loaded machine (eight ranks on two cores) held the lock past 10 s once, and a run that could have waited
failed with "database is locked"."""


def _busy(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def until_unlocked(action, timeout_s: float = BUSY_TIMEOUT_S):
    """``action()``, again while SQLite says the database is busy, for up to ``timeout_s``. The busy timeout
    covers a write waiting for a write, but not every lock: a connection opening a store while the last one to
    close it checkpoints and removes its write-ahead log gets SQLITE_BUSY at once (twelve runs started at once
    on one store failed so in a CI run)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on error: a crash never leaves half a batch."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def __enter__(self):
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._rollback()
            return False
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error:
            self._rollback()   # a COMMIT that failed (a full disk) may leave the transaction open
            raise
        return False

    def _rollback(self) -> None:
        # SQLite rolls a transaction back itself on some errors (SQLITE_FULL, SQLITE_IOERR): a ROLLBACK then raised
        # "cannot rollback - no transaction is active" in place of the error that said what happened.
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
