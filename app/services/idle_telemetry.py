"""IdleTelemetry: the nvitop-like view while no run is on: every GPU and core, sampled in the background.

A run samples its own devices (engine.run.session); this sampler stops before a run
starts and starts again when it ends. Listing the targets initializes NVML, which can
take a while on a GPU machine, so the sampler is made on a helper thread, which also
reads the GPU inventory once. The UI thread only drains what was sampled.
"""
from __future__ import annotations

import threading

from PySide6 import QtCore


class IdleTelemetry(QtCore.QObject):
    sigInventory = QtCore.Signal(list)     # the GPUs (gpu_inventory.GpuInfo), read once
    sigUnavailable = QtCore.Signal(str)    # why there is no idle telemetry (the sampler could not start)

    def __init__(self, rate_hz: float, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.rate_hz = rate_hz
        self._sampler = None
        self._lock = threading.Lock()
        # Each start and stop moves the generation on: a helper thread that finds it moved lets its
        # sampler go (a run started, or the window closed, while NVML was initializing).
        self._generation = 0
        self._closed = False
        self._inventory_read = False

    @property
    def active(self) -> bool:
        return self._sampler is not None

    def cpu_time_s(self) -> float | None:
        """CPU seconds the running sampler's thread used; None when none runs."""
        sampler = self._sampler
        return sampler.cpu_time_s if sampler is not None else None

    def start(self) -> None:
        """Sample every GPU and core from a helper thread; nothing once closed."""
        with self._lock:
            if self._closed:
                return
            self._generation += 1
            generation = self._generation
            read_inventory = not self._inventory_read
        threading.Thread(target=self._make_sampler, args=(generation, read_inventory),
                         name="telemetry-start", daemon=True).start()

    def drain(self) -> list:
        """The samples taken since the last drain (UI thread)."""
        sampler = self._sampler
        return sampler.drain() if sampler is not None else []

    def stop(self) -> list:
        """End the sampler (a run samples its own devices); returns its last samples."""
        with self._lock:
            self._generation += 1
            sampler, self._sampler = self._sampler, None
        if sampler is None:
            return []
        sampler.stop(timeout=0.2)  # the thread sleeps between passes; it ends within one (a few ms)
        return sampler.drain()

    def close(self) -> list:
        """Stop for good (the window closes); returns the last samples."""
        with self._lock:
            self._closed = True
        return self.stop()

    # -- the helper thread ----------------------------------------------------------------
    def _make_sampler(self, generation: int, read_inventory: bool) -> None:
        try:
            from engine.telemetry import TelemetrySampler, all_targets, gpu_inventory
            sampler = TelemetrySampler(all_targets(), rate_hz=self.rate_hz, on_warning=lambda msg: None)
            gpus = gpu_inventory.inventory() if read_inventory else None
        except Exception as exc:  # no telemetry is a message, not a crash
            self._emit(self.sigUnavailable, f"telemetry unavailable: {type(exc).__name__}: {exc}")
            return
        with self._lock:
            if generation != self._generation or self._closed:
                return  # a run started (or the window closed) meanwhile
            sampler.start()
            self._sampler = sampler
            if gpus is not None:
                self._inventory_read = True
        if gpus is not None:
            self._emit(self.sigInventory, gpus)

    @staticmethod
    def _emit(signal, value) -> None:
        try:
            signal.emit(value)   # queued to the UI thread
        except RuntimeError:     # the window was deleted meanwhile
            pass
