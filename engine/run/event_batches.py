"""The worker's events on their way to the run session: read off the worker's stdout on a thread of their own
into a bounded queue, and taken from it a batch at a time, one store transaction each (engine/run/session.py)."""
from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from engine.events import Finished, Launched, WorkerEvent
from engine.results import Step
from engine.wire import worker as protocol

FLUSH_S = 0.1       # events are stored, then handed on, in batches of this long at most
FLUSH_EVENTS = 64   # and of this many events at most: a tiny model's steps come by the thousand a second
EVENT_BACKLOG = 4 * FLUSH_EVENTS


def event_queue() -> queue.Queue:
    """Bounded: when the store falls behind a fast run, the reader waits and the worker with it, instead of the
    session's process holding the backlog (it grew by tens of MB in a 20,000-step burst)."""
    return queue.Queue(maxsize=EVENT_BACKLOG)


def _timed(events: Iterable[WorkerEvent], on_end: Callable[[float | None], None]) -> Iterator[WorkerEvent]:
    """``events``; at their end, ``on_end`` gets this thread's CPU seconds from the first step on (the session's
    reading: its share of the recording's cost), None without steps."""
    start = None
    for event in events:
        if start is None and isinstance(event, Step):
            start = time.thread_time()
        yield event
    on_end(time.thread_time() - start if start is not None else None)


def read_worker_events(stdout, events: queue.Queue, done: threading.Event,
                       on_reader_cpu: Callable[[float | None], None]) -> None:
    """The worker's events from its ``stdout`` into ``events``, then None (the end of its output), until ``done``
    is set; ``on_reader_cpu`` as ``_timed`` says, before the None."""
    try:
        for event in itertools.chain(_timed(protocol.read_events(stdout), on_reader_cpu), [None]):
            while not done.is_set():
                try:
                    events.put(event, timeout=0.5)
                    break
                except queue.Full:
                    continue
            if done.is_set():
                return  # the session ended early: nobody reads on
    except (ValueError, OSError):
        return  # the session closed the pipe as it ended


def next_batch(events: queue.Queue) -> list:
    """The events of the next FLUSH_S after the first one arrives (at most FLUSH_EVENTS; or until the
    worker's output ends).

    One store transaction per batch: a transaction per step, at tens of steps a
    second, cost the ranks' cores a few percent of a small model's step time.
    A batch ends at ``launched`` too: the sampler follows the ranks' memory from
    the next pass, and a rank forked warm may take its first steps within 0.1 s.
    """
    try:
        batch = [events.get(timeout=0.25)]
    except queue.Empty:
        return []
    until = time.monotonic() + FLUSH_S
    while (batch[-1] is not None and not isinstance(batch[-1], (Finished, Launched))
           and len(batch) < FLUSH_EVENTS):
        remaining = until - time.monotonic()
        if remaining <= 0:
            break
        try:
            batch.append(events.get(timeout=remaining))
        except queue.Empty:
            break
    return batch
