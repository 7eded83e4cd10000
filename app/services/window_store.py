"""The window's run store: opened in the store process, whatever state the file is in; its recovery on a thread.

The app's process opens files it does not choose (Qt's file dialogs read them to
learn their type), and on Linux any close of a store's file drops the SQLite
locks the process holds on it (docs/store.md). So the window holds no SQLite
connection itself: ``serve_from_child`` puts every store this process opens in
the store process (engine/store/server.py).

A damaged store is set aside by its first open (engine/store/repair.py) and a
fresh one starts; a store that cannot be opened at all (a folder not writable,
a disk gone) gives way to one in a temporary folder. Either way the window
opens, and ``StoreNotice`` says what happened, in the window's problem area.
"""
from __future__ import annotations

import sqlite3
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

from PySide6 import QtCore

from engine.store import RemoteStore, StoreDamaged, default_path, open_store, serve_from_child


@dataclass(frozen=True)
class StoreNotice:
    message: str           # the whole story: what was wrong, where the file went, what Recover does
    kept_at: str | None    # a damaged store set aside, whose readable runs can be recovered
    headline: str = ""     # one line above the plots (the message behind Details: four lines squeezed the plots)


def open_window_store(db_path: str | None) -> tuple[RemoteStore, StoreNotice | None]:
    serve_from_child()
    try:
        return open_store(db_path), None
    except StoreDamaged as damaged:
        if damaged.kept_at is not None:
            try:
                return open_store(db_path), StoreNotice(
                    f"{damaged}. Recover copies the runs it can still read into the new store.", damaged.kept_at,
                    "The run store was damaged and set aside; a fresh one starts.")
            except (sqlite3.Error, OSError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
        else:
            problem = str(damaged)
    except (sqlite3.Error, OSError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    fallback = Path(tempfile.mkdtemp(prefix="splitscope-")) / "runs.sqlite3"
    return open_store(fallback), StoreNotice(
        f"The run store {db_path or default_path()} cannot be used ({problem}). This session's runs are kept in "
        f"{fallback} instead: export what you want to keep.", None,
        "The run store cannot be used: this session's runs are kept in a temporary one (see Details).")


class StoreRecovery(QtCore.QObject):
    """Copies what can be read of a damaged store into the window's, on a thread of its own."""
    sigDone = QtCore.Signal(str)      # what was recovered (engine.store.Recovery.describe)
    sigFailed = QtCore.Signal(str)
    _sigFinished = QtCore.Signal(str, bool)   # from the thread: its text, whether it failed

    def __init__(self, db_path: str, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.db_path = db_path
        self.busy = False
        self._sigFinished.connect(self._finished, QtCore.Qt.ConnectionType.QueuedConnection)

    def recover(self, kept_at: str) -> None:
        if self.busy:
            return
        self.busy = True
        db_path, recovery = self.db_path, weakref.ref(self)   # the thread holds no reference to a Qt object

        def work():
            try:
                with open_store(db_path) as store:
                    text, failed = store.recover_from(kept_at).describe(), False
            except Exception as exc:  # a copy that fails is said; the kept file stays as it was
                text, failed = f"recovering {kept_at} failed: {type(exc).__name__}: {exc}", True
            try:
                alive = recovery()
                if alive is not None:
                    alive._sigFinished.emit(text, failed)
            except RuntimeError:   # the window closed meanwhile
                pass

        threading.Thread(target=work, name="store-recovery", daemon=True).start()

    def _finished(self, text: str, failed: bool) -> None:
        self.busy = False
        (self.sigFailed if failed else self.sigDone).emit(text)
