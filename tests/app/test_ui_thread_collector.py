"""While the window lives, Python's cyclic collector runs on the UI thread only (app/services/ui_thread_collector.py):
a Qt object in a reference cycle, collected on another thread, would abort the process."""
from __future__ import annotations

import gc
import threading

from PySide6 import QtCore


class Cycle(QtCore.QObject):
    def __init__(self):
        super().__init__()
        self.me = self  # a cycle: only the cyclic collector frees it


def test_cycles_are_collected_on_the_ui_thread_and_the_collector_is_back_after_the_window(qtbot, window):
    qtbot.waitUntil(lambda: window.collector.running)  # with the window's services
    assert not gc.isenabled()
    destroyed_on: list[bool] = []
    cycle = Cycle()
    cycle.destroyed.connect(lambda *_: destroyed_on.append(threading.current_thread() is threading.main_thread()),
                            QtCore.Qt.ConnectionType.DirectConnection)
    del cycle

    kept: list = []

    def allocate():  # a background thread that allocates past the thresholds, as an export's drawing does
        kept.extend([] for _ in range(gc.get_threshold()[0] * 20))
    worker = threading.Thread(target=allocate)
    worker.start()
    worker.join()
    assert destroyed_on == []  # not collected there
    qtbot.waitUntil(lambda: destroyed_on == [True], timeout=30_000)  # on the UI thread's timer
    window.shutdown()
    assert gc.isenabled()
