"""UiThreadCollector: Python's cyclic garbage collector runs on the UI thread only, while a window lives.

The automatic collector runs in whichever thread happens to allocate past its
threshold: an export drawing its figures, a run's reader. A Qt object caught in
a reference cycle is then destroyed on that thread, which Qt does not survive
("Fatal Python error: Aborted" while "Garbage-collecting" in a PNG export's
thread, in the app's tests). pyqtgraph ships the cure, ``GarbageCollector``:
the automatic collector off, a timer on the UI thread collecting the
generations whose thresholds were passed. Here it is shared by the windows
alive and undone after the last (a test process, a script, goes on with the
collector as it was), even after a window deleted without its shutdown.
Everything made at start-up is frozen out of its reach (app/application.py), so
a collection is short.
"""
from __future__ import annotations

import functools
import gc

from pyqtgraph.util.garbage_collector import GarbageCollector
from PySide6 import QtCore

INTERVAL_S = 1.0   # pyqtgraph's: a cycle lives a second longer at most

_holders: set[int] = set()     # the windows' collectors not stopped yet
_shared: list = []             # [GarbageCollector, the automatic collector's state before it] while any holds it


class UiThreadCollector(QtCore.QObject):
    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        key = id(self)
        if not _holders:
            enabled = gc.isenabled()
            _shared[:] = [GarbageCollector(interval=INTERVAL_S), enabled]   # it turns the automatic one off
        _holders.add(key)
        self.destroyed.connect(functools.partial(_release, key))   # no reference to self: it may be gone

    @property
    def running(self) -> bool:
        return id(self) in _holders and bool(_shared) and _shared[0].timer.isActive()

    @property
    def enabled_before(self) -> bool:
        """Whether the automatic collector ran before the first window's collector turned it off."""
        return _shared[1] if _shared else gc.isenabled()

    def stop(self) -> None:
        _release(id(self))


def running() -> bool:
    """Whether a window's collector runs (the automatic one is off meanwhile)."""
    return bool(_holders)


def _release(key: int, *_) -> None:
    if key not in _holders:
        return
    _holders.discard(key)
    if not _holders and _shared:
        collector, enabled = _shared
        collector.timer.stop()
        _shared.clear()
        if enabled:
            gc.enable()
