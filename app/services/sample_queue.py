"""SampleQueue: telemetry samples handed from the engine's threads to the UI thread's redraw tick."""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable


class SampleQueue:
    def __init__(self):
        self._lock = threading.Lock()
        self._samples: deque = deque()

    def add(self, samples: list, when: Callable[[], bool] | None = None) -> None:
        """From any thread; with ``when``, only if it holds, decided under the lock that ``take`` holds."""
        with self._lock:
            if when is None or when():
                self._samples.extend(samples)

    def take(self) -> list:
        """Every sample added since the last call, in order."""
        with self._lock:
            samples = list(self._samples)
            self._samples.clear()
        return samples
