"""Where each step's batch comes from: prepared ahead (the default) or drawn inside the step.

Prepared ahead is what a DataLoader with prefetching and pinned memory gives a
training loop: the step finds its batch waiting on the device that reads it, so
the measured step holds the model's work only, as the theoretical bubble beside
it assumes. The feed draws a bounded pool of batches from the model's seeded
data before the first step, places each where the executor reads it, and cycles
through the pool. Every rank draws the same pool, so every strategy trains on
the same batches.

Drawn inside the step (``--input-prep in-step``) draws a fresh batch on the host
each step, timed as ``data`` on the process's CPU device, and copies it to the
devices inside the step: for seeing what input preparation costs.

Through a DataLoader (``--input-prep loader``, engine.run.loader) the pool's samples
are decoded and augmented as they are read, on the loader's workers or (with none)
by the rank itself; the time the rank takes each batch, on its own device and the
host's clock, is ``data`` where the rank decodes it (busy) and ``data-wait`` where
it waits for the workers (idle, a GPU too), and the copy to a GPU is ``transfer``.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from itertools import cycle, islice

from engine.devices import Device
from engine.rules import effective_batch_size
from engine.strategies.base import Executor, RankContext

POOL_BATCHES = 16          # distinct batches at most: enough that training is not one batch repeated
POOL_BYTES = 256 * 2**20   # and at most this much memory per process


def batch_bytes(batch) -> int:
    return sum(t.numel() * t.element_size() for t in batch)


class BatchFeed:
    """``data_device``: the device a wait for the batch idles (the process's own); ``loader_cores``: where a
    DataLoader's workers run (engine.run.loader_placement)."""

    def __init__(self, ctx: RankContext, executor: Executor, data_device: Device | None,
                 loader_cores: list[int] = ()):
        config = ctx.config
        self._executor = executor
        self._timer = ctx.timer
        self._data_device = data_device
        self._drawn = ctx.spec.data.batches(effective_batch_size(config))
        self._pool = None
        self._loader = None
        if config.input_prep in ("ahead", "loader"):
            first = next(self._drawn)
            size = max(1, min(POOL_BATCHES, config.steps, POOL_BYTES // max(1, batch_bytes(first))))
            batches = [first, *islice(self._drawn, size - 1)]
            self.pool_size = len(batches)
        if config.input_prep == "ahead":
            self._pool = cycle([executor.place_batch(*batch) for batch in batches])
        elif config.input_prep == "loader":
            from engine.run.loader import BatchLoader
            gpus = any(d.kind == "cuda" for d in ctx.devices)
            self._loader = BatchLoader(config, batches, executor.input_rows, list(loader_cores),
                                       pin_memory=config.pin_memory and gpus)
            # without workers the rank decodes each batch itself (busy); with them it waits for theirs (idle)
            self._loader_kind = "data-wait" if config.loader_workers else "data"

    def next(self):
        """This step's (inputs, targets), as the executor's step takes them."""
        if self._pool is not None:
            return next(self._pool)
        if self._loader is not None:
            waited = time.perf_counter()
            inputs, targets = self._loader.next()
            if self._data_device is not None:   # the host's clock, on a GPU too: it idles while the host waits
                self._timer.add(self._data_device.name, self._loader_kind, waited, time.perf_counter())
            return self._executor.place_batch(inputs, targets)
        data = self._timer.span(self._data_device, "data") if self._data_device is not None else nullcontext()
        with data:
            inputs, targets = next(self._drawn)
        return self._executor.place_batch(inputs, targets)

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()
