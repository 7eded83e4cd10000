"""A plotted series' arrays: a figure's series as floats, what a curve draws of them, and the y range a
constant needs to read as one."""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pyqtgraph as pg

from engine.figures import Series
from engine.figures.numbers import is_number

CONSTANT_SPAN = 0.2   # the y range a constant series is shown in, as a share of its value
SAME_VALUE = 1e-6     # values this close (relatively) are one: a rate computed per step wobbles in its last bits


def floats(s: Series) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A series as arrays: points of no x left out, a y of no number NaN (a break), errors 0 where none."""
    x = np.array([v if is_number(v) else np.nan for v in s.x], dtype=float)
    y = np.array([v if is_number(v) else np.nan for v in s.y], dtype=float)
    keep = np.isfinite(x)
    err = None
    if s.yerr is not None:
        err = np.array([abs(v) if is_number(v) else 0.0 for v in s.yerr], dtype=float)[keep]
    return x[keep], y[keep], err


def drawn(x: np.ndarray, y: np.ndarray,
          joined: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, str | np.ndarray]:
    """What a curve draws: its points of a value, joined but across a NaN (a gap), as pyqtgraph's
    ``connect`` array says (point i joins i+1 where True); ``joined``: the breaks known besides the NaN (point
    j joins j + 1 only where True: a PeakCurve's gaps, given as indices). Without either, as given (no copy)."""
    has = np.isfinite(y)
    if has.all():
        return x, y, ("all" if joined is None or joined[:-1].all() else joined)
    index = np.flatnonzero(has)
    connect = np.diff(index) == 1   # the next point with a value is the next point: no gap between
    if joined is not None:
        connect &= joined[index[:-1]]
    return x[index], y[index], np.append(connect, False)


def keep_a_constant_readable(view: pg.ViewBox, data: Iterable[tuple[np.ndarray, np.ndarray]]) -> None:
    """Where every point plotted has one value v (a simulated or capped throughput), the view's y range is at
    least CONSTANT_SPAN x |v| around it; pyqtgraph's auto range would span v +/- 0.5, and an axis running
    16383.6 .. 16384.4 reads as change where there is none. Any other data: no limit."""
    # fmin/fmax pass over NaN without a filtered copy (each frame scans an hour of every device's samples)
    extremes = [(float(np.fmin.reduce(y)), float(np.fmax.reduce(y))) for _, y in data if len(y)]
    extremes = [(lo, hi) for lo, hi in extremes if math.isfinite(lo) and math.isfinite(hi)]
    low = min((lo for lo, _ in extremes), default=None)
    high = max((hi for _, hi in extremes), default=None)
    constant = low is not None and high is not None and high - low <= SAME_VALUE * abs(high) and high != 0
    wanted = CONSTANT_SPAN * abs(high) if constant else None
    if view.state["limits"]["yRange"][0] != wanted:
        view.setLimits(minYRange=wanted)
