"""The one training loop every strategy runs in, on every rank.

The executor owns the forward, backward and optimizer step; the loop owns the
batches and the timing, and reports each step to the worker. Stop requests are
the worker's: it ends the rank processes between or during steps.
"""
from __future__ import annotations

import time
from typing import Callable

from engine.strategies.base import Executor, RankContext


def train(ctx: RankContext, executor: Executor, emit: Callable[..., None]) -> None:
    config = ctx.config
    batches = ctx.spec.data.batches(config.effective_batch_size)
    timer = ctx.timer
    for step in range(config.steps):
        # Every rank draws every batch, so the seeded sequence stays the same everywhere.
        inputs, targets = next(batches)
        timer.begin_step()
        start = time.perf_counter()
        result = executor.step(inputs, targets)
        intervals = timer.end_step()
        end = time.perf_counter()
        emit("rank_step", step=step, start=start, end=end, intervals=intervals,
             loss_part=result.loss_part, samples=result.samples, batch_split=result.batch_split)
