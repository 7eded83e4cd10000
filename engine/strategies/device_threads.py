"""One long-lived thread per device, as nn.DataParallel's parallel_apply has a thread per GPU.

A CPU virtual device's thread pins itself to its core once, so its torch ops
(one intra-op thread) run there; a GPU's thread makes that GPU its current
device, so its work goes to that GPU's current stream.
"""
from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

from engine.measure.flops import carried
from engine.precision import current_autocast


class DeviceThread:
    def __init__(self, device):
        self._jobs: queue.Queue = queue.Queue()
        self._device = device
        self._thread = threading.Thread(target=self._run, name=f"device-{device.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._device.kind == "cuda":
            import torch
            torch.cuda.set_device(self._device.index)
        elif self._device.core is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {self._device.core})  # 0: the calling thread on Linux
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, autocast, counting, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                with autocast(), counting():
                    result = fn()
                # Resolved once this thread left its modes: the submitter may leave its own at once.
                future.set_result(result)
            except BaseException as exc:
                future.set_exception(exc)

    def submit(self, fn: Callable) -> Future:
        """Run ``fn`` on the device's thread, under the submitting thread's autocast (torch keeps it per thread)
        and FLOP counter (engine.measure.flops: a dispatch mode is per thread too)."""
        future: Future = Future()
        self._jobs.put((fn, current_autocast(), carried(), future))
        return future

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)
