"""Where a telemetry line must break: no line is drawn across time without samples.

A sampler reads every device at a steady rate (engine/telemetry/sampler.py, 10 Hz
by default); stored samples older than ten minutes are buckets of 1 or 10 seconds
(engine/record/recorder.py THINNING), each with its ``span_s``. Two neighbouring samples
further apart than ``GAP_PERIODS`` of their period were not neighbours in time:
the sampler was off (the idle view pauses while a run samples its own devices),
the device was not in the run, or the run had ended. A line between them would
read as activity, so both backends break it there: the app leaves the two points
unconnected (app/views/plots/series_plot.py), matplotlib draws the NaN this module puts
between them (engine/export/drawing.py).

The rule, once: a break between samples i and i+1 when
``t[i+1] - t[i] > max(GAP_PERIODS * period, MIN_GAP_S)``, the period being the
larger of the two samples' spans (a bucket) or, for samples as taken, the median
spacing of the latest ``RECENT`` of them (the sampler's rate as it ran).

Sequences in, lists out (None at a break: the engine needs no NumPy); NumPy arrays
in, arrays out (NaN at a break). The live plots take ``gap_after``'s indices as they are
(app/views/plots/peak_curve.py): an hour of samples is not copied to put NaN in it.
"""
from __future__ import annotations

from collections.abc import Sequence
from statistics import median

GAP_PERIODS = 3.0   # a sample that came this many periods late: samples are missing, not late
# The floor: a sampler starved for a moment by the ranks on its cores is late by a few tenths of a
# second; the drawn utilization is a one-second mean (engine/telemetry/smooth.py) that spans that anyway.
MIN_GAP_S = 1.0
RECENT = 256        # spacings the period is the median of: the rate as it is now, in constant time


def _is_array(values) -> bool:
    return type(values).__module__ == "numpy"


def sampling_period(t: Sequence[float], spans: Sequence | None = None) -> float:
    """The median spacing of the latest samples as taken (not buckets); 0.0 with fewer than two."""
    if _is_array(t) and spans is None:
        import numpy as np
        steps = np.diff(t[-RECENT - 1:])
        steps = steps[steps > 0]
        return float(np.median(steps)) if len(steps) else 0.0
    raw = [i for i in range(len(t)) if spans is None or not spans[i]][-RECENT - 1:]
    steps = [t[j] - t[i] for i, j in zip(raw, raw[1:], strict=False) if j == i + 1 and t[j] > t[i]]
    return float(median(steps)) if steps else 0.0


def gap_after(t: Sequence[float], spans: Sequence | None = None, period: float | None = None):
    """The indices i with no line from sample i to sample i+1 (``t`` ascending). ``spans``: each sample's
    bucket width (None or 0 for a sample as taken); ``period``: the sampling period, if known."""
    if period is None:
        period = sampling_period(t, spans)
    limit = max(GAP_PERIODS * period, MIN_GAP_S)
    if _is_array(t) and spans is None:
        import numpy as np
        return np.flatnonzero(np.diff(t) > limit)
    out = []
    for i in range(len(t) - 1):
        width = max(spans[i] or 0.0, spans[i + 1] or 0.0) if spans is not None else 0.0
        if t[i + 1] - t[i] > max(limit, GAP_PERIODS * width):
            out.append(i)
    return out


def broken(x: Sequence[float], y: Sequence, gaps) -> tuple:
    """``x`` and ``y`` with a point of no value (None, or NaN in arrays) after each index in ``gaps``,
    at the middle of the gap: x stays ascending (pyqtgraph clips a view by bisecting x)."""
    if _is_array(x):
        import numpy as np
        gaps = np.asarray(gaps, dtype=int)
        if not len(gaps):
            return x, y
        middle = (x[gaps] + x[gaps + 1]) / 2
        return np.insert(x, gaps + 1, middle), np.insert(np.asarray(y, dtype=float), gaps + 1, np.nan)
    xs, ys = list(x), list(y)
    for i in reversed(list(gaps)):
        xs.insert(i + 1, (x[i] + x[i + 1]) / 2)
        ys.insert(i + 1, None)
    return xs, ys
