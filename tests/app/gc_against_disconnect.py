"""A garbage collection on a worker thread against a disconnect on the UI thread (tests/app/test_ui_thread_gc.py).

The suite once hung 280 s with the UI thread inside pyqtgraph's ``_updateView``, in a
PySide ``disconnect``. The mechanism (read in PySide 6.10's and Qt's sources, seen in
native stacks): Qt guards connections with a pool of 131 mutexes chosen by an
object's address; PySide's ``disconnect`` keeps the GIL while it waits for one.
Python's cyclic collector, run by whichever thread allocates, frees a Qt object in a
cycle on that thread: ``~QObject`` takes the object's pooled mutex and calls its
sender's ``disconnectNotify``, which for a Python subclass (pyqtgraph's ViewBox) needs
the GIL. Two objects sharing a mutex, and each thread waits for the other for ever.

``python gc_against_disconnect.py collector``: the app's ``UiThreadCollector`` runs, as
while a window lives: the worker's allocations collect nothing, the UI thread's
disconnect returns, and the cycle is freed on the UI thread's timer (exit 0).
``... automatic``: Python's own collector; the process deadlocks (the caller's
deadline ends it). A third argument, seconds: past them, every thread's Python stack
goes to stderr and the process exits 1 (faulthandler), so a hang says where it was. The sender's ``disconnectNotify`` waits half a second on the worker
to make the race certain rather than rare.
"""
from __future__ import annotations

import faulthandler
import gc
import sys
import threading
import time

import shiboken6
from PySide6 import QtCore, QtWidgets

POOL = 131   # qtbase/src/corelib/kernel/qobject.cpp: the signal-slot mutexes, by address


def mutex_of(obj: QtCore.QObject) -> int:
    return (shiboken6.getCppPointer(obj)[0] & 0xFFFFFFFF) % POOL


freed_off_the_ui_thread = threading.Event()
freed_on_the_ui_thread = threading.Event()


class View(QtCore.QObject):
    """A Python subclass that is a sender: Qt calls back into Python when a receiver goes."""
    sigRangeChanged = QtCore.Signal()

    def disconnectNotify(self, signal):  # noqa: N802 - Qt's name
        if threading.current_thread() is threading.main_thread():
            freed_on_the_ui_thread.set()
        else:
            freed_off_the_ui_thread.set()
            time.sleep(0.5)


class Item(QtCore.QObject):
    def __init__(self):
        super().__init__()
        self.me = self   # a cycle: only the cyclic collector frees it

    def viewRangeChanged(self):  # noqa: N802 - pyqtgraph's name
        pass


def main(mode: str, dump_after_s: float | None = None) -> int:
    if dump_after_s is not None:
        faulthandler.dump_traceback_later(dump_after_s, exit=True)
    app = QtWidgets.QApplication(sys.argv[:1])
    if mode == "collector":
        from app.services.ui_thread_gc import UiThreadCollector
        collector = UiThreadCollector()   # noqa: F841 - it runs while it lives
    view = View()
    gc.collect()
    item = Item()
    view.sigRangeChanged.connect(item.viewRangeChanged)
    # Views until one shares the item's mutex (kept alive, so none is reused): 4 x 131 of them missed every
    # time about one run in fifty ((130/131)^524), and the script ended in StopIteration instead of its race.
    others = []
    while not others or mutex_of(others[-1]) != mutex_of(item):
        others.append(View())
    peer = others[-1]
    peer_item = Item()
    peer.sigRangeChanged.connect(peer_item.viewRangeChanged)
    del item
    worker = threading.Thread(target=lambda: [[] for _ in range(gc.get_threshold()[0] * 20)], daemon=True)
    worker.start()
    freed_off_the_ui_thread.wait(2.0)
    peer.sigRangeChanged.disconnect(peer_item.viewRangeChanged)   # as pyqtgraph's _updateView does
    deadline = time.monotonic() + 10
    while mode == "collector" and not freed_on_the_ui_thread.is_set() and time.monotonic() < deadline:
        app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 100)
    print(f"disconnected; freed off the UI thread: {freed_off_the_ui_thread.is_set()}, "
          f"on it: {freed_on_the_ui_thread.is_set()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None))
