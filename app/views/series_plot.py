"""SeriesPlot: one pyqtgraph plot of named series, with PNG/SVG/PDF/CSV export in its context menu.

It draws a figure definition (engine.figures: series, marks, axes, title) as
the exports draw it, or live series handed to it one by one; either way its
export is a figure definition drawn by the exports' backend (plot_export).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.views import plot_export, theme
from engine.figures import Axis, Figure, Series, palette, series_table
from engine.figures.numbers import is_number

MARK_SYMBOL_SIZE = 16  # the ring at a mark's point (the best of a sweep)


DOWNSAMPLE_SAMPLES_PER_PIXEL = 1.0
SMOOTH_EDGES_UP_TO = 1000  # points: above, a curve is drawn without antialiasing (see set_series)


class LiveCurve(pg.PlotDataItem):
    """A PlotDataItem that processes its data once per frame.

    pyqtgraph re-clips and re-downsamples a curve on every x-range change and
    again on every setData: with the view scrolling each frame that is twice
    per curve per frame. Inside ``SeriesPlot.frame()`` a range change only
    marks the curve; the frame's setData (or one catch-up at the end) does the
    work once. Our buffers never hold NaN, so the finite checks are skipped,
    and the y-range clipping guard (dynamicRangeLimit) is off: it would redo
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


def cache_axes(item: pg.PlotItem) -> None:
    """Paint each axis (tick text and grid) from a pixmap until it changes.

    Replaying an axis's text is 1-2.5 ms a paint, and the y axis with its grid lines
    lies under every curve update: without the cache, axes were most of a plot's paint.
    """
    for name in ("left", "bottom"):
        item.getAxis(name).setCacheMode(QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)


class SeriesPlot(pg.PlotWidget):
    """A plot whose curves are keyed by name; the data behind each curve is kept for CSV export."""

    sigExported = QtCore.Signal(str)        # path written
    sigExportFailed = QtCore.Signal(str)    # message

    def __init__(self, title: str, y_label: str, y_units: str | None = None, x_label: str = "time",
                 x_units: str | None = "s", export_name: str = "plot",
                 parent: QtWidgets.QWidget | None = None):
        super().__init__(parent=parent, background=theme.PANEL)
        self.export_name = export_name
        self.export_dir = ""
        self.spec = Figure(export_name, title, Axis(x_label, x_units), Axis(y_label, y_units))
        self.figure: Figure | None = None   # the definition drawn by draw_figure, until live series replace it
        item = self.getPlotItem()
        self.show_title(title)
        self.set_axes(self.spec.x, self.spec.y)
        item.showGrid(x=True, y=True, alpha=theme.GRID_ALPHA)
        for axis in ("left", "bottom"):
            ax = item.getAxis(axis)
            ax.setPen(pg.mkPen(theme.MUTED))
            ax.setTextPen(pg.mkPen(theme.MUTED))
        # The two settings that bound the cost of long histories (pyqtgraph's
        # scrollingPlots example): draw at most ~one point per pixel column,
        # keeping peaks, and skip what lies outside the visible x range.
        item.setDownsampling(auto=True, mode="peak")
        item.setClipToView(True)
        item.setMenuEnabled(True)
        item.hideButtons()
        self.legend = item.addLegend(offset=(8, 4),  # top left: the newest data is on the right
                                     labelTextColor=theme.FOREGROUND,
                                     brush=pg.mkBrush(20, 23, 28, 180), labelTextSize="8pt")
        self.legend.setColumnCount(2)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._data: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._styles: dict[str, dict] = {}        # how each curve was drawn: its export draws it so
        self._extras: list[pg.GraphicsObject] = []  # a figure's marks and error bars
        self.export_actions = plot_export.add_export_actions(self)
        cache_axes(item)
        self.setMinimumSize(220, 120)

    @classmethod
    def of_frame(cls, frame: Figure, parent: QtWidgets.QWidget | None = None) -> "SeriesPlot":
        """A plot titled and labelled as the figure ``frame`` (engine.figures) is: live or exported, one name."""
        plot = cls(frame.title, frame.y.label, frame.y.unit, x_label=frame.x.label, x_units=frame.x.unit,
                   export_name=frame.name, parent=parent)
        plot.spec = frame
        return plot

    def show_title(self, title: str) -> None:
        self.getPlotItem().setTitle(f"<span style='color:{theme.FOREGROUND};font-size:10pt'>{title}</span>")

    def set_axes(self, x: Axis, y: Axis, shown_x: str | None = None) -> None:
        """The axes' labels, units in brackets as the exports print them; ``shown_x`` labels the screen's x
        axis differently from the export's (live: "seconds from now" over times since the app started)."""
        self.spec = self.spec.with_data(x=x, y=y)
        item = self.getPlotItem()
        item.setLabel("left", y.text, color=theme.MUTED)
        item.setLabel("bottom", shown_x or x.text, color=theme.MUTED)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming)
        # QGraphicsView's own hint is 600x480 per plot: four of them asked for far more
        # than a laptop screen, and Qt's layouts then shrank the rows into each other.
        return QtCore.QSize(420, 210)

    # -- series ----------------------------------------------------------------
    def set_series(self, key: str, x: np.ndarray, y: np.ndarray, color: str, name: str | None = None,
                   dash: int = 0, width: float = 1.6, faint: bool = False) -> None:
        """``faint``: the raw samples behind their mean, translucent, without a legend entry and drawn without
        antialiasing (a third of a redraw's cost, and no one reads its edges).

        A curve of more points than ``SMOOTH_EDGES_UP_TO`` is drawn without antialiasing too: a noisy
        step curve of thousands of steps is a band of vertical strokes, and antialiasing them took
        40-80 ms a paint (the UI thread stalled); with a few hundred points the edges are what one sees."""
        curve = self._curves.get(key)
        if curve is None:
            style = palette.DASHES[dash % len(palette.DASHES)]
            pen = pg.mkPen(palette.rgba(color, palette.FAINT_ALPHA) if faint else color, width=width)
            if style is not None:
                pen.setDashPattern([float(v) for v in style])
            curve = LiveCurve(pen=pen, name=None if faint else (name or key),
                              **({"antialias": False} if faint else {}))
            self.getPlotItem().addItem(curve)
            self._curves[key] = curve
            self._styles[key] = {"name": name or key, "color": color, "dash": dash, "width": width, "faint": faint}
        smooth_edges = not faint and len(x) <= SMOOTH_EDGES_UP_TO
        if curve.curve.opts.get("antialias") != smooth_edges:
            curve.opts["antialias"] = curve.curve.opts["antialias"] = smooth_edges  # the curve paints with it
        self._data[key] = (x, y)
        # A line needs two points: a one-step run, or a short run's one memory sample,
        # would show nothing. Such series are drawn as dots until they grow.
        lone = len(x) < 2
        if lone != (curve.opts.get("symbol") is not None):
            curve.setSymbol("o" if lone else None)
            curve.setSymbolSize(6)
            curve.setSymbolBrush(curve.opts["pen"].color())
            curve.setSymbolPen(None)
        curve.setData(x, y)

    def draw_figure(self, figure: Figure) -> None:
        """Show a figure definition: its series (gaps left out), error bars, marks, axes and y range."""
        self.clear_series()
        self.show_title(figure.title)  # it may say what it holds: "(1 step in 40 of 200,000)", "· 2 runs"
        self.set_axes(figure.x, figure.y)
        item = self.getPlotItem()
        for s in figure.series:
            x, y, err = _finite(s)
            self.set_series(s.name, x, y, s.color, s.name, dash=s.dash, width=s.width, faint=s.faint)
            if s.markers:
                curve = self._curves[s.name]
                curve.setSymbol("o")
                curve.setSymbolBrush(pg.mkBrush(s.color))
                curve.setSymbolSize(7)
            if err is not None and np.any(err > 0):
                self._add_extra(pg.ErrorBarItem(x=x, y=y, height=2 * err, beam=0.0, pen=pg.mkPen(s.color, width=1.2)))
        for mark in figure.marks:
            self._add_extra(pg.InfiniteLine(pos=float(mark.x), angle=90, movable=False,
                                            pen=pg.mkPen(mark.color, style=QtCore.Qt.PenStyle.DashLine),
                                            label=mark.label, labelOpts={"color": mark.color, "position": 0.92}))
            if is_number(mark.y):
                self._add_extra(pg.ScatterPlotItem([mark.x], [mark.y], symbol="o", size=MARK_SYMBOL_SIZE,
                                                   brush=None, pen=pg.mkPen(mark.color, width=2)))
        item.enableAutoRange()
        low, high = figure.y_range
        if is_number(low) and is_number(high):
            item.enableAutoRange(y=False)
            item.setYRange(low, high, padding=0.02)
        self.figure = figure

    def _add_extra(self, extra: pg.GraphicsObject) -> None:
        self.getPlotItem().addItem(extra)
        self._extras.append(extra)

    @contextlib.contextmanager
    def frame(self):
        """Batch a frame's range change and data updates: each curve is processed once."""
        curves = list(self._curves.values())
        for curve in curves:
            curve.hold = True
        view = self.getPlotItem().getViewBox()
        try:
            yield
        finally:
            # Auto-range now, while the curves are held: left to the paint, the new range
            # would move the axes during the paint and the view would paint twice.
            view.updateAutoRange()
            for curve in list(self._curves.values()):
                curve.hold = False
                if curve.range_dirty:
                    curve.range_dirty = False
                    curve.viewRangeChanged()
            # Apply the new range to the view's transform now, for the same reason.
            view.updateMatrix()

    def has_series(self, key: str) -> bool:
        return key in self._curves

    def series_name(self, key: str) -> str | None:
        """The legend's name for a series (None: drawn without a legend entry)."""
        return self._curves[key].name()

    def legend_names(self) -> list[str]:
        return [label.text for _, label in self.legend.items]

    def series_keys(self) -> list[str]:
        return list(self._curves)

    def series_data(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        return self._data[key]

    def point_count(self) -> int:
        return sum(len(x) for x, _ in self._data.values())

    def remove_series(self, key: str) -> None:
        curve = self._curves.pop(key, None)
        self._data.pop(key, None)
        self._styles.pop(key, None)
        if curve is not None:
            self.getPlotItem().removeItem(curve)
            self.legend.removeItem(curve)

    def clear_series(self) -> None:
        for key in list(self._curves):
            self.remove_series(key)
        for extra in self._extras:
            self.getPlotItem().removeItem(extra)
        self._extras = []
        if self.figure is not None:
            self.show_title(self.spec.title)
        self.figure = None

    # -- export ----------------------------------------------------------------
    def to_figure(self) -> Figure:
        """What this plot shows, as a figure definition: the one it drew, or its curves as they are now."""
        if self.figure is not None:
            return self.figure
        series = [Series(x=np.asarray(x).tolist(), y=np.asarray(y).tolist(), **self._styles[key])
                  for key, (x, y) in self._data.items()]
        columns, rows = series_table(series, self.spec.x, self.spec.y)
        return self.spec.with_data(series=series, columns=columns, rows=rows)

    def export(self, fmt: str, path: str | Path) -> Path | None:
        """Write the plot as ``fmt`` (png, svg, pdf or csv) to ``path``; emits sigExported or sigExportFailed."""
        return plot_export.export_widget(self, fmt, path)


def _finite(s: Series) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A series' drawable points (our curves skip the finite check: they must hold no gaps) and their errors."""
    x = np.array([v if is_number(v) else np.nan for v in s.x], dtype=float)
    y = np.array([v if is_number(v) else np.nan for v in s.y], dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    err = None
    if s.yerr is not None:
        err = np.array([abs(v) if is_number(v) else 0.0 for v in s.yerr], dtype=float)[keep]
    return x[keep], y[keep], err
