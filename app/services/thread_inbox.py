"""ThreadInbox: items posted from any thread, handed to the UI thread in order, one signal per burst.

The run and experiment clients receive callbacks on the engine's background
threads; Qt widgets may only be touched on the UI thread. Items queue here and
one queued signal drains them all, however fast they come.
"""
from __future__ import annotations

import threading
from collections import deque

from PySide6 import QtCore


class ThreadInbox(QtCore.QObject):
    sigItems = QtCore.Signal(list)   # on the UI thread: every item posted since the last delivery
    _sigPending = QtCore.Signal()

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._lock = threading.Lock()
        self._items: deque = deque()
        self._notified = False
        self._sigPending.connect(self._deliver, QtCore.Qt.ConnectionType.QueuedConnection)

    def put(self, item) -> None:
        """From any thread."""
        with self._lock:
            self._items.append(item)
            notify = not self._notified
            self._notified = True
        if notify:
            try:
                self._sigPending.emit()
            except RuntimeError:  # the inbox was deleted while a background thread ended
                pass

    def has_pending(self) -> bool:
        with self._lock:
            return bool(self._items) or self._notified

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._notified = False

    def _deliver(self) -> None:
        with self._lock:
            items = list(self._items)
            self._items.clear()
            self._notified = False
        if items:
            self.sigItems.emit(items)
