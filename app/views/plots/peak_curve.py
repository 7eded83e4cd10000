"""PeakCurve: a long series (an hour of 10 Hz telemetry) drawn at a bare PlotCurveItem's cost.

pyqtgraph's PlotDataItem clips a curve to the view and keeps each pixel column's lowest and
highest sample (``setDownsampling(mode="peak")``, ``setClipToView``), but its update costs
0.6-0.9 ms of Python whatever the points (measured here: 0.94 ms with 36,000, 0.61 ms with
800), and a live frame updates every device's curves: 32 of them for 8 devices, most of
the frame. A PlotCurveItem given the same few hundred points takes 0.02 ms. So this curve
does the clipping and the peaks itself (``visible_peaks``, NumPy, 0.08 ms for an hour) and
hands the PlotCurveItem only what one can see; it does them again when the view's range or
size changes, as PlotDataItem would.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from app.views.plots.series_arrays import drawn


def visible_peaks(x: np.ndarray, y: np.ndarray, x0: float, x1: float,
                  columns: int) -> tuple[np.ndarray, np.ndarray]:
    """The samples in [x0, x1] and one on each side (the line runs to the edges); where there are more than
    two a column, each of ``columns`` equal spans of x keeps its lowest and highest, at the span's first x: what
    pyqtgraph's peak downsampling draws. A span holding only a break (NaN) stays a break, so a gap wider than a
    column still breaks the line; ``x`` ascending."""
    first = max(int(np.searchsorted(x, x0, "left")) - 1, 0)
    last = min(int(np.searchsorted(x, x1, "right")) + 1, len(x))
    x, y = x[first:last], y[first:last]
    if columns < 1 or len(x) <= 2 * columns or x1 <= x0:
        return x, y
    starts = np.searchsorted(x, np.linspace(x0, x1, columns + 1)[:-1], "left")   # ascending, as the edges
    # A column without samples starts where the next does: one start each (reduceat reads a repeated start as
    # a span of its one sample); none past the end.
    starts = starts[np.concatenate(([True], starts[1:] != starts[:-1])) & (starts < len(x))]
    if len(starts) and starts[0] != 0:
        starts = np.concatenate(([0], starts))   # the sample before the view begins a span of its own
    low, high = np.fmin.reduceat(y, starts), np.fmax.reduceat(y, starts)
    return np.repeat(x[starts], 2), np.column_stack([low, high]).ravel()


class PeakCurve(pg.PlotCurveItem):
    """A series' whole data kept, what is visible drawn (``visible_peaks``). ``hold`` and ``range_dirty`` as
    series_plot.LiveCurve's: inside ``SeriesPlot.frame()`` a range change is done once, at the frame's end."""

    def __init__(self, **kwargs):
        self.hold = False
        self.range_dirty = False
        self._whole: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))
        super().__init__(skipFiniteCheck=True, **kwargs)

    def set_whole(self, x: np.ndarray, y: np.ndarray) -> None:
        """The series (``x`` ascending, NaN in ``y`` at a break)."""
        self._whole = (x, y)
        self._draw_visible()

    def viewRangeChanged(self, *_args) -> None:  # noqa: N802
        if self.hold:
            self.range_dirty = True
            return
        self._draw_visible()

    def _draw_visible(self) -> None:
        self.range_dirty = False
        x, y = self._whole
        view = self.getViewBox()
        if view is not None and len(x):
            (x0, x1), _ = view.viewRange()
            x, y = visible_peaks(x, y, x0, x1, int(view.width()))
        x, y, connect = drawn(x, y)
        self.setData(x, y, connect=connect)
