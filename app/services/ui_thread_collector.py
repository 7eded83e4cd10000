"""UiThreadCollector: Python's cyclic garbage collector, run on the UI thread only.

The collector runs in whichever thread happens to allocate past its threshold: an
export drawing its figures, a run's reader. A Qt object caught in a reference
cycle is then destroyed on that thread, and Qt aborts the process ("Fatal Python
error: Aborted" while "Garbage-collecting" in a PNG export's thread, in the app's
tests on 2026-12-02). So while the window lives the automatic collector is off,
and a timer on the UI thread collects the generations whose thresholds were
passed, as the automatic collector would have, just never elsewhere. Everything
made at start-up is frozen out of its reach (app/application.py), so a
collection is short.
"""
from __future__ import annotations

import gc

from PySide6 import QtCore

CHECK_MS = 500   # how often the counts are looked at: a cycle lives half a second longer, at most

_running: set[int] = set()        # the collectors started and not stopped (one a window)
_enabled_before: list[bool] = []  # the automatic collector's state before the first of them


class UiThreadCollector(QtCore.QObject):
    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._timer = QtCore.QTimer(self, interval=CHECK_MS)
        self._timer.timeout.connect(self.check)
        key = id(self)
        # A window deleted without its shutdown must not leave the automatic collector off.
        self.destroyed.connect(lambda *_: _release(key))

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    def start(self) -> None:
        if not _running:
            _enabled_before[:] = [gc.isenabled()]
        _running.add(id(self))
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        """The automatic collector back as it was once no window needs it off (a test process goes on)."""
        self._timer.stop()
        _release(id(self))

    def check(self) -> None:
        counts, thresholds = gc.get_count(), gc.get_threshold()
        generation = -1
        for g in range(3):
            if thresholds[g] and counts[g] > thresholds[g]:
                generation = g
        if generation >= 0:
            gc.collect(generation)


def _release(key: int) -> None:
    if key in _running:
        _running.discard(key)
        if not _running and _enabled_before and _enabled_before[0]:
            gc.enable()
