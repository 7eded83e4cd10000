"""A GPU's counters that mean something only as the difference of two readings: energy and GPM.

NVML's total-energy counter counts millijoules since the driver loaded, and GPM
(GPU performance monitoring, Hopper and newer) gives its metrics only between
two samples. One ``EnergyTotal`` and one ``GpmInterval`` per GPU target keep
the previous reading; the GPU reader (gpu_target.py) asks them each poll.
"""
from __future__ import annotations

from typing import Any

from engine.telemetry import gpu_fields

COUNTER_TOP_MJ = 2**64
"""NVML's energy counter is an unsigned 64-bit count of millijoules: past the top it starts again at 0."""
WRAP_MARGIN_MJ = 2**32
# A counter that drops from within this much of the top has wrapped (4.3 MJ: more than an hour of a 1 kW
# board, far more than the time between two polls); any other drop is the driver reloading or the GPU being
# reset, which starts the count again from 0.

GPM_MIN_INTERVAL_S = 0.09
# NVML refreshes the GPM counters about every 100 ms (nvml.h: the interval between two nvmlGpmSampleGet calls
# "should be greater than 100ms"): a shorter interval has little or nothing new to compute from. 90 ms rather
# than 100 lets the default 10 Hz passes, a thread wake-up early or late, each take a sample; a faster poll
# takes one every few passes and the passes in between carry None.

NO_GPM: dict[str, float | None] = dict.fromkeys(gpu_fields.GPM_FIELDS)


def used_mj(previous_mj: int, current_mj: int) -> int:
    """Millijoules used between two readings of the energy counter: 0 across a reset, the rest across a wrap."""
    if current_mj >= previous_mj:
        return current_mj - previous_mj
    if previous_mj >= COUNTER_TOP_MJ - WRAP_MARGIN_MJ:
        return current_mj + COUNTER_TOP_MJ - previous_mj
    return 0  # reset: what was used between the readings is unknown, and not negative


class EnergyTotal:
    """Joules one GPU used since the first reading of its energy counter: starts at 0.0, only grows."""

    def __init__(self) -> None:
        self._previous_mj: int | None = None
        self._used_mj = 0  # whole millijoules: the total stays exact however long the run

    def add(self, reading_mj: int | None) -> float | None:
        """Count a new reading; the total so far in joules, or None when there was no reading (the next one
        then counts the whole time since the last)."""
        if reading_mj is None:
            return None
        if self._previous_mj is not None:
            self._used_mj += used_mj(self._previous_mj, reading_mj)
        self._previous_mj = reading_mj
        return self._used_mj / 1000.0


class GpmInterval:
    """One GPU's GPM metrics over the interval since its previous GPM sample.

    Two sample buffers, allocated once: the previous sample's and the one the
    next sample is read into; they swap after each sample, so a poll allocates
    nothing. ``close()`` gives both back to NVML.
    """

    def __init__(self, index: int):
        self.index = index
        self.refused = False
        self._previous: Any = None      # the buffer holding the last sample taken
        self._previous_t: float | None = None
        self._spare: Any = None         # the buffer the next sample goes into

    def start(self, now: float) -> None:
        """Take the first sample: the first interval runs from here."""
        self._take(now)

    def read(self, now: float) -> dict[str, float | None]:
        """The GPM fields over the interval from the previous sample to one taken now; all None before there is
        an interval, while it is shorter than ``GPM_MIN_INTERVAL_S`` (it goes on to a later poll), or when
        GPM is refused."""
        if self.refused:
            return NO_GPM
        if self._previous_t is not None and now - self._previous_t < GPM_MIN_INTERVAL_S:
            return NO_GPM
        had_previous = self._previous is not None
        if not self._take(now) or not had_previous:
            return NO_GPM
        fields, error = gpu_fields.gpm_metrics(self._spare, self._previous)  # the swap made _spare the older
        if error is not None:
            self._failed(error)
            return NO_GPM
        return fields

    def close(self) -> None:
        """Give the sample buffers back to NVML (a later ``read`` starts a new interval)."""
        for buffer in (self._previous, self._spare):
            if buffer is not None:
                gpu_fields.gpm_free(buffer)
        self._previous = self._spare = self._previous_t = None

    def _take(self, now: float) -> bool:
        """Sample into the spare buffer and make it the previous one; False when no sample was taken."""
        if self._spare is None:
            self._spare, error = gpu_fields.gpm_buffer()
            if error is not None:
                self._failed(error)
                return False
        error = gpu_fields.gpm_sample_into(self.index, self._spare)
        if error is not None:  # the previous sample stays: the interval goes on to the next poll
            self._failed(error)
            return False
        self._previous, self._spare = self._spare, self._previous
        self._previous_t = now
        return True

    def _failed(self, error: int) -> None:
        gpu_fields.gpm_refused(self.index, error)  # notes a refusal once; a transient error changes nothing
        if not gpu_fields.probe(self.index).gpm:
            self.refused = True
            self.close()
