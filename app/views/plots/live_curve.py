"""LiveCurve: a short live series (steps, a stored run's curves) as a PlotDataItem processed once a frame.

A long one (an hour of telemetry) is a PeakCurve (peak_curve.py); both keep ``hold`` and
``range_dirty`` for SeriesPlot.frame() (series_plot.py).
"""
from __future__ import annotations

import pyqtgraph as pg

DOWNSAMPLE_SAMPLES_PER_PIXEL = 1.0


class LiveCurve(pg.PlotDataItem):
    """A PlotDataItem that processes its data once per frame.

    pyqtgraph re-clips and re-downsamples a curve on every x-range change and
    again on every setData: with the view scrolling each frame that is twice
    per curve per frame. Inside ``SeriesPlot.frame()`` a range change only
    marks the curve; the frame's setData (or one catch-up at the end) does the
    work once. What it is handed holds no NaN (set_series turns a gap's NaN
    into an unjoined pair, ``connect``), so the finite checks are skipped, and
    the y-range clipping guard (dynamicRangeLimit) is off: it would redo
    the work on every y auto-range.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("skipFiniteCheck", True)
        kwargs.setdefault("dynamicRangeLimit", None)
        self.hold = False           # set before the base class calls setData
        self.range_dirty = False
        super().__init__(*args, **kwargs)
        # Peak downsampling keeps each bin's min and max: bins of one pixel column draw the
        # same picture as pyqtgraph's default of five samples a pixel, with a fifth of the
        # path to stroke (antialiased paths are most of a redraw's cost). No setter exists.
        self.opts["autoDownsampleFactor"] = DOWNSAMPLE_SAMPLES_PER_PIXEL

    def viewRangeChanged(self, vb=None, ranges=None, changed=None):  # noqa: N802
        if self.hold:
            self.range_dirty = True
            return
        super().viewRangeChanged(vb, ranges, changed)

    def setData(self, *args, **kwargs):  # noqa: N802
        self.range_dirty = False
        if self.hold:
            # The view range may have moved since the last update: drop the cached clip.
            self.setProperty("xViewRangeWasChanged", True)
        super().setData(*args, **kwargs)
