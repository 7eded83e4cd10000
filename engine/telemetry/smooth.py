"""The smoothed utilization line: each sample's mean over the last second of samples.

A CPU core's busy share comes from the kernel's 10 ms tick counters, so at 10 Hz
a device that computes half of every 0.2 s step reads 0 % and 100 % in turns;
the 50 % that its timeline proves is the mean over a second. Both the app's live
plots and the exports draw this line over the faint raw samples.
"""
from __future__ import annotations

from collections.abc import Sequence

SMOOTH_S = 1.0  # the averaging window: a few samples at 10 Hz, a few steps of a typical run


def trailing_mean(t: Sequence[float], y: Sequence[float], window_s: float = SMOOTH_S):
    """For each sample, the mean of the samples in (t - window_s, t]: a trailing window, so the live
    edge never waits for samples to come. ``t`` ascending. After a gap the window holds fewer samples.

    NumPy arrays in, a NumPy array out (vectorized: the app redraws an hour of samples
    per device); sequences in, a list out (the engine needs no NumPy)."""
    if type(t).__module__ == "numpy":
        return _trailing_mean_array(t, y, window_s)
    out: list[float] = []
    start, total = 0, 0.0
    for end in range(len(t)):
        total += y[end]
        while t[start] <= t[end] - window_s:
            total -= y[start]
            start += 1
        out.append(total / (end - start + 1))
    return out


def _trailing_mean_array(t, y, window_s: float):
    import numpy as np
    sums = np.concatenate(([0.0], np.cumsum(y, dtype=float)))
    start = np.searchsorted(t, t - window_s, side="right")
    end = np.arange(1, len(t) + 1)
    return (sums[end] - sums[start]) / (end - start)


CORE_APART_POINTS = 10.0
"""How far apart (percentage points) a CPU device's own one-second mean and its core's total must come before
the core's total is drawn beside it: nearer, the two are one line and the second is clutter."""


def core_total_apart(own_t: Sequence[float], own_means: Sequence[float],
                     core_t: Sequence[float], core_means: Sequence[float]) -> bool:
    """Whether a device's core's total (``core_means`` at ``core_t``) came more than CORE_APART_POINTS from
    its own work's means at some instant both were read (one sampler pass reads both: the same ``t``)."""
    own = dict(zip(own_t, own_means, strict=True))
    return any(abs(core - own[t]) > CORE_APART_POINTS for t, core in zip(core_t, core_means, strict=True) if t in own)
