"""PeakCurve: a long series (an hour of 10 Hz telemetry) drawn at a bare PlotCurveItem's cost.

pyqtgraph's PlotDataItem clips a curve to the view and keeps each pixel column's lowest and
highest sample (``setDownsampling(mode="peak")``, ``setClipToView``), but its update costs
0.6-0.9 ms of Python whatever the points (measured here: 0.94 ms with 36,000, 0.61 ms with
800), and a live frame updates every device's curves: 32 of them for 8 devices, most of
the frame. A PlotCurveItem given the same few hundred points takes 0.02 ms. So this curve
does the clipping and the peaks itself (``visible_peaks``, NumPy, 0.08 ms for an hour) and
hands the PlotCurveItem only what one can see; it does them again when the view's range or
size changes, as PlotDataItem would. Where samples are missing (engine/figures/gaps.py) the
line breaks by the ``connect`` array pyqtgraph takes: the gaps come as indices, so an hour of
samples is never copied to put a NaN between them (``broken``'s insert, 0.1-0.2 ms a curve).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from app.views.plots.series_arrays import drawn

NO_GAPS = np.empty(0, dtype=np.intp)


def visible_peaks(x: np.ndarray, y: np.ndarray, x0: float, x1: float, columns: int,
                  gaps: np.ndarray = NO_GAPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The samples in [x0, x1] and one on each side (the line runs to the edges); where there are more than
    two a column, each of ``columns`` equal spans of x keeps its lowest and highest, at the span's first x: what
    pyqtgraph's peak downsampling draws. ``gaps``: the indices i (ascending) with no line from sample i to i+1.
    Returns x, y and ``joined`` (point j joins j + 1 where True, pyqtgraph's ``connect``): a gap between two
    columns' samples stays a break, one inside a column is narrower than a pixel. ``x`` ascending."""
    first = max(int(np.searchsorted(x, x0, "left")) - 1, 0)
    last = min(int(np.searchsorted(x, x1, "right")) + 1, len(x))
    x, y = x[first:last], y[first:last]
    # the gaps between two of the kept samples, counted from the first kept
    local = gaps[np.searchsorted(gaps, first):np.searchsorted(gaps, last - 1)] - first
    if columns < 1 or len(x) <= 2 * columns or x1 <= x0:
        joined = np.ones(len(x), dtype=bool)
        joined[local] = False
        return x, y, joined
    # the columns' left edges: x0 + k * width (np.linspace's Python costs more than the arithmetic)
    starts = np.searchsorted(x, x0 + (x1 - x0) / columns * np.arange(columns), "left")
    # A column without samples starts where the next does: one start each (reduceat reads a repeated start as
    # a span of its one sample); none past the end.
    starts = starts[np.concatenate(([True], starts[1:] != starts[:-1])) & (starts < len(x))]
    if len(starts) and starts[0] != 0:
        starts = np.concatenate(([0], starts))   # the sample before the view begins a span of its own
    if not len(starts):
        return x[:0], y[:0], np.ones(0, dtype=bool)
    low, high = np.fmin.reduceat(y, starts), np.fmax.reduceat(y, starts)
    joined = np.ones(2 * len(starts), dtype=bool)
    # A gap from a span's last sample to the next span's first: no line from the one's high to the other's low.
    span = np.searchsorted(starts, local, "right") - 1
    between = (span + 1 < len(starts)) & (local + 1 == starts[np.minimum(span + 1, len(starts) - 1)])
    joined[2 * span[between] + 1] = False
    return np.repeat(x[starts], 2), np.column_stack([low, high]).ravel(), joined


def unwrapped(x: np.ndarray, y: np.ndarray, gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ring buffer's view (app/state/ring_buffer.py) as it was when handed over: the samples appended since
    were written over its start (newer than its end), so they are left out, and the gaps' indices follow."""
    if len(x) < 2 or x[0] <= x[-1]:
        return x, y, gaps
    kept = int(np.argmax(x <= x[-1]))
    return x[kept:], y[kept:], gaps[gaps >= kept] - kept


class PeakCurve(pg.PlotCurveItem):
    """A series' whole data kept, what is visible drawn (``visible_peaks``). ``hold`` and ``range_dirty`` as
    live_curve.LiveCurve's: inside ``SeriesPlot.frame()`` new data and a range change are drawn once, at the
    frame's end. A view change that leaves x alone (the y axis auto-ranged) draws nothing."""

    def __init__(self, **kwargs):
        self.hold = False
        self.range_dirty = False
        self._whole: tuple[np.ndarray, np.ndarray, np.ndarray] = (np.empty(0), np.empty(0), NO_GAPS)
        self._drawn_for: tuple[float, float, int] | None = None   # the x range and width last drawn for
        super().__init__(skipFiniteCheck=True, **kwargs)

    def set_whole(self, x: np.ndarray, y: np.ndarray, gaps: np.ndarray | None = None) -> None:
        """The series (``x`` ascending; NaN in ``y`` or an index in ``gaps``, as engine/figures/gaps.py's
        gap_after gives them, at a break)."""
        self._whole = (x, y, NO_GAPS if gaps is None else np.asarray(gaps, dtype=np.intp))
        self._drawn_for = None
        if self.hold:
            self.range_dirty = True
            return
        self._draw_visible()

    def viewRangeChanged(self, *_args) -> None:  # noqa: N802
        if self.hold:
            self.range_dirty = True
            return
        if self._drawn_for is None or self._drawn_for != self._view_x():
            self._draw_visible()

    def _view_x(self) -> tuple[float, float, int] | None:
        view = self.getViewBox()
        if view is None:
            return None
        (x0, x1), _ = view.viewRange()
        return x0, x1, int(view.width())

    def _draw_visible(self) -> None:
        self.range_dirty = False
        # A view change between two ticks redraws from the buffer's views, some samples since written over.
        x, y, gaps = unwrapped(*self._whole)
        shown = self._view_x()
        if shown is not None and len(x):
            x, y, joined = visible_peaks(x, y, *shown, gaps)
        else:
            joined = np.ones(len(x), dtype=bool)
            joined[gaps] = False
        x, y, connect = drawn(x, y, joined)
        self.setData(x, y, connect=connect)
        self._drawn_for = shown
