"""The user's code running now in this process (a model file's import, its ``build_model()``, its ``make_batch()``,
the model's forward), and since when: what a deadline names when that code does not return.

The validation child (engine/run/validate.py) checks the calls against the hang timeout from a thread of its own,
and answers for the call that overran instead of waiting for ever on a file that loops or blocks.
"""
from __future__ import annotations

import functools
import time
from contextlib import contextmanager

_running: list[tuple[str, float]] = []   # the calls in progress, outermost first: (what, monotonic start)


@contextmanager
def calling(what: str):
    _running.append((what, time.monotonic()))
    try:
        yield
    finally:
        _running.pop()


def timed_call(what: str, function):
    """``function`` that records itself as ``what`` while it runs."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        with calling(what):
            return function(*args, **kwargs)
    return call


def overdue(limit_s: float) -> str | None:
    """The outermost call running for longer than ``limit_s`` (the one that did not return), else None."""
    running = list(_running)
    if running and time.monotonic() - running[0][1] > limit_s:
        return running[0][0]
    return None
