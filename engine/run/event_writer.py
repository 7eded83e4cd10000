"""The worker's stdout to its session: its events, one line each, with the merged steps written a few together.

A step's line written alone wakes the session's reader for it: at the DDP example's 13-18 ms steps on two busy
cores that wake-up, not the line's parsing, was most of the session's recording CPU (README, the watch bench). So
a step's line is held up to ``HOLD_S`` and goes with the next line due; anything else (a warning, a log line, the
run's end) is written at once, after the steps held before it, so the order is the order the worker sent them
in. The worker's loop calls ``write_due`` after each event it takes and at least every 0.1 s (its queue's
timeout: no wake-up of its own for a held line), so a held step waits at most about 0.15 s when no other line
comes; and ``write_all`` before anything that may wait seconds (a rank's end, a stop), where a kill would lose
what is held.
"""
from __future__ import annotations

import threading
import time

HOLD_S = 0.05   # a step's line waits this long for others (0.15 s at most: the loop's timeout); plots redraw at 10-20 Hz


class EventWriter:
    def __init__(self, out, hold_s: float = HOLD_S):
        self.out, self.hold_s = out, hold_s
        self._held: list[str] = []
        self._since = 0.0                 # when the oldest held line came
        self._lock = threading.Lock()     # the launch's and the nodes' threads send warnings too

    def write(self, line: str, hold: bool = False) -> None:
        """``line`` (no newline) to the session: held where ``hold`` (a step's) and the oldest held line is
        younger than HOLD_S, else written with everything held before it."""
        with self._lock:
            now = time.monotonic()
            if not self._held:
                self._since = now
            self._held.append(line + "\n")
            if not hold or now - self._since >= self.hold_s:
                self._write_held()

    def write_due(self) -> None:
        """What is held, where its oldest line has waited HOLD_S."""
        with self._lock:
            if self._held and time.monotonic() - self._since >= self.hold_s:
                self._write_held()

    def write_all(self) -> None:
        """Everything held (the run's end)."""
        with self._lock:
            if self._held:
                self._write_held()

    def _write_held(self) -> None:
        lines, self._held = "".join(self._held), []
        try:
            self.out.write(lines)
            self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the reader is gone; the run still ends cleanly
