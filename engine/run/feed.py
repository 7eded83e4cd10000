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
"""
from __future__ import annotations

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
    def __init__(self, ctx: RankContext, executor: Executor, data_device: Device | None):
        config = ctx.config
        self._executor = executor
        self._timer = ctx.timer
        self._data_device = data_device
        self._drawn = ctx.spec.data.batches(effective_batch_size(config))
        self._pool = None
        if config.input_prep == "ahead":
            first = next(self._drawn)
            size = max(1, min(POOL_BATCHES, config.steps, POOL_BYTES // max(1, batch_bytes(first))))
            batches = [first, *islice(self._drawn, size - 1)]
            self.pool_size = len(batches)
            self._pool = cycle([executor.place_batch(*batch) for batch in batches])

    def next(self):
        """This step's (inputs, targets), as the executor's step takes them."""
        if self._pool is not None:
            return next(self._pool)
        data = self._timer.span(self._data_device, "data") if self._data_device is not None else nullcontext()
        with data:
            inputs, targets = next(self._drawn)
        return self._executor.place_batch(inputs, targets)
