"""What a rank is doing, for the worker's watchdog (engine/run/worker.py): its phase as it changes, and a
heartbeat that says where its main thread is.

A hang's message must name the rank that stopped and the last thing it did. Steps say how far a rank got;
before its first step only its phases do (``Phase`` events: progress, as a step is). When every rank has stopped
making progress, because one stopped and its peers wait for it in a collective, only a heartbeat tells them
apart: the stopped rank's falls silent (SIGSTOP, a native deadlock that holds Python's lock), while its peers'
keep coming, from inside torch.distributed. The heartbeat is a thread writing one ``Alive`` line every
``interval(hang timeout)`` seconds, a sixth of the limit at most: one short line a second or less.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time

from engine.wire.rank import Alive, Phase

STARTING = "starting"
IMPORTING = "importing torch"
JOINING = "joining the process group"
BUILDING = "building the model"   # the model file's import, its build_model(), the model's split into blocks
PREPARING = "setting up the strategy and measuring the devices' peak FLOP/s"
SCRIPT = "running the script, before its first training step"
TRAINING = "training"
# Ours: bounded by the worker's start-up allowance, not by the hang timeout. Before the user's code runs (a busy
# machine's imports, a rendezvous that waits for the slowest rank), and between the model's build and the first step
# (PREPARING: the split's planning, the strategy's executor, the devices' peaks measured: a few tenths of a second
# alone, over 4 s with eight runs on two cores, as in tests/test_hangs.py). The user's code (BUILDING, SCRIPT, every
# step and the make_batch() in it) is bounded by the hang timeout; a forward our set-up runs (a pipeline's planning
# times the blocks) is ours there.
START_UP = frozenset({STARTING, IMPORTING, JOINING, PREPARING})

_TORCH = os.sep + "torch" + os.sep
_DISTRIBUTED = _TORCH + "distributed" + os.sep
# Not the user's code: this package, Python's own library and installed packages (a wait in threading.py says
# less than the user's line that called it).
_NOT_THE_USERS = tuple({os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
                        *(os.path.abspath(sysconfig.get_paths()[name]) + os.sep
                          for name in ("stdlib", "platstdlib", "purelib", "platlib"))})


def interval(limit_s: float) -> float:
    """Seconds between heartbeats for a hang timeout of ``limit_s``."""
    return min(5.0, max(0.2, limit_s / 6))


def silent_after(limit_s: float) -> float:
    """A heartbeat missing for this long means the process no longer answers (three beats missed)."""
    return 3 * interval(limit_s)


def where(thread_id: int | None) -> tuple[str | None, bool]:
    """Where a thread is: its innermost frame in torch.distributed's API (a collective it waits in), else its
    innermost frame outside torch and this package (the user's code: ``forward (model.py:41)``); and whether it is
    inside torch.distributed."""
    frame = sys._current_frames().get(thread_id) if thread_id is not None else None
    mine = None
    while frame is not None:
        path, name = frame.f_code.co_filename, frame.f_code.co_name
        if _DISTRIBUTED in path and not name.startswith("_") and name != "wrapper":
            return f"torch.distributed's {name}", True
        if mine is None and _TORCH not in path and not path.startswith(_NOT_THE_USERS + ("<",)):
            mine = f"{name} ({os.path.basename(path)}:{frame.f_lineno})"
        frame = frame.f_back
    return mine, False


class Heartbeat:
    """A rank's phases and heartbeat, written with ``emit`` (its EventChannel's)."""

    def __init__(self, emit, limit_s: float):
        self._emit, self._period = emit, interval(limit_s)
        self.phase = STARTING
        self._main = threading.main_thread().ident
        threading.Thread(target=self._beat, name="heartbeat", daemon=True).start()

    def enter(self, phase: str) -> None:
        self.phase = phase
        self._emit(Phase(phase))

    def training(self) -> None:
        """The rank said Ready (which the worker takes as this phase's start)."""
        self.phase = TRAINING

    def _beat(self) -> None:
        while True:
            time.sleep(self._period)
            place, in_collective = where(self._main)
            try:
                self._emit(Alive(self.phase, place, in_collective))
            except (OSError, ValueError):   # the channel closed: the process is ending
                return
