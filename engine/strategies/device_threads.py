"""One long-lived thread per CPU virtual device, pinned to its core.

What nn.DataParallel does with CUDA devices (a thread per device in
parallel_apply), for CPU virtual devices: each thread pins itself to its core
once, so its torch ops (one intra-op thread) run there.
"""
from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from typing import Callable


class DeviceThread:
    def __init__(self, name: str, core: int | None):
        self._jobs: queue.Queue = queue.Queue()
        self._core = core
        self._thread = threading.Thread(target=self._run, name=f"device-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._core is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {self._core})  # 0: the calling thread on Linux
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

    def submit(self, fn: Callable) -> Future:
        future: Future = Future()
        self._jobs.put((fn, future))
        return future

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)
