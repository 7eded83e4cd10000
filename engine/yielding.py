"""The recording yields the cores to the training it records.

A run's steps are merged by its worker, recorded by its session and sampled by
the telemetry, on the same cores as its ranks when the machine has no spare
one (CPU virtual devices take every core here). Each thread of that recording
lowers its own CPU priority (on Linux a thread's nice value is its own), so the
scheduler gives the cores to a rank that can run and the recording takes the
moments the ranks leave (waiting on each other in a collective, on their data):
what it costs a step shows less in the step. Its CPU time is the same, and the
summary says it (``RunSummary.recording_cpu_s``). Not so low that it cannot keep
up with ranks that never wait: at nice 5 a thread still gets about a quarter of
a core beside a rank at 0, several times what recording a step takes.
"""
from __future__ import annotations

import os
import threading

from engine.environment import variable

RECORDING_NICE = 5
# For bench/watch_bench.py only: "0" leaves the recording at the training's priority (its "not yielding" arm).
NICE_VARIABLE = "SPLITSCOPE_RECORDING_NICE"


def yield_to_training() -> None:
    """Lower the calling thread's CPU priority by ``RECORDING_NICE`` (Linux; elsewhere, or not allowed, nothing)."""
    given = variable(NICE_VARIABLE, "")
    nice = int(given) if given.isdigit() else RECORDING_NICE
    if not nice:
        return
    try:
        thread = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, now + nice))
    except (OSError, AttributeError):
        pass
