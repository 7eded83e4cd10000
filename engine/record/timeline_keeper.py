"""Which steps keep their full timeline in the store: all of them, or a bounded sample (the default).

A step's intervals are most of what a run stores (about 8 KB a step for an
8-micro-batch pipeline: 2.3 GB an hour). Every step keeps its summary row
(time, loss, throughput, busy shares); the intervals of a sample are enough to
see what each device does, at the start, at the end and wherever a step was odd:

- the first ``FIRST`` steps (warm-up and the steady state after it);
- the last ``LAST`` steps (held in memory, rewritten in the store every half
  minute, kept for good when the run ends, however it ends: ``RunRecorder``);
- an even sample between: every step while the run is short, then every 2nd,
  4th, ...: ``PER_OCTAVE`` steps per doubling of the run's length;
- outliers: a step that took more than twice, or less than half, the median of
  the ``NEIGHBOURS`` steps before it (at most ``OUTLIERS_PER_OCTAVE`` per doubling
  of the run, so an odd hour late in a day-long run is kept as well as one at
  its start).

An hour of a 4-ms step (900,000 steps) keeps about 1,600 steps' timelines,
and at most 1,300 outliers besides (13 doublings past ``FIRST``).
"""
from __future__ import annotations

import statistics
from collections import deque
from typing import TYPE_CHECKING

from engine.config import TIMELINE_MODES

if TYPE_CHECKING:
    from engine.results import Step

FIRST, LAST, PER_OCTAVE, NEIGHBOURS, OUTLIERS_PER_OCTAVE = 200, 200, 100, 50, 100


def stride(step: int) -> int:
    """The even sample's spacing at ``step``: 1, then doubling each time the run doubles past PER_OCTAVE."""
    spacing = 1
    while step >= 2 * PER_OCTAVE * spacing:
        spacing *= 2
    return spacing


class TimelineKeeper:
    """Decides, as each step comes, whether its intervals are kept for good; holds the last ``LAST`` steps'
    intervals in memory, which the recorder rewrites every half minute and keeps when the run ends
    (writing and deleting them one by one cost the recording process, on the ranks' cores, a few times
    the work of the steps it keeps)."""

    def __init__(self, mode: str = "sampled"):
        if mode not in TIMELINE_MODES:
            raise ValueError(f"unknown timeline mode {mode!r}; allowed: {', '.join(TIMELINE_MODES)}")
        self.keep_all = mode == "all"
        self.recent: deque[Step] = deque(maxlen=LAST)   # the last steps not kept for good (RunRecorder stores them)
        self._times: deque[float] = deque(maxlen=NEIGHBOURS)
        self._outliers: dict[int, int] = {}  # per octave of the run (step.bit_length()): how many kept

    def keep(self, event: Step) -> bool:
        """Whether this step's intervals are stored now, for good; if not, they wait among the last ones."""
        step, time_s = event.step, event.time_s
        kept = self.keep_all or step < FIRST or step % stride(step) == 0 or self._is_outlier(step, time_s)
        if time_s is not None:
            self._times.append(time_s)
        if not kept:
            self.recent.append(event)
        return kept

    def take_recent(self) -> list[Step]:
        """The last steps that are not kept for good, to store as the run ends."""
        events, self.recent = list(self.recent), deque(maxlen=LAST)
        return events

    def _is_outlier(self, step: int, time_s: float | None) -> bool:
        octave = step.bit_length()
        if (time_s is None or len(self._times) < NEIGHBOURS // 2
                or self._outliers.get(octave, 0) >= OUTLIERS_PER_OCTAVE):
            return False
        median = statistics.median(self._times)
        if time_s > 2 * median or time_s < 0.5 * median:
            self._outliers[octave] = self._outliers.get(octave, 0) + 1
            return True
        return False
