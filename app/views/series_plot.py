"""SeriesPlot: one pyqtgraph plot of named series, with PNG/SVG/CSV export in its context menu."""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.views import plot_export, theme

_DASHES = [QtCore.Qt.PenStyle.SolidLine, QtCore.Qt.PenStyle.DashLine, QtCore.Qt.PenStyle.DotLine,
           QtCore.Qt.PenStyle.DashDotLine]


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
        self.x_name = x_label
        self.y_name = y_label
        item = self.getPlotItem()
        item.setTitle(f"<span style='color:{theme.FOREGROUND};font-size:10pt'>{title}</span>")
        item.setLabel("left", y_label, units=y_units, color=theme.MUTED)
        item.setLabel("bottom", x_label, units=x_units, color=theme.MUTED)
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
        self._add_export_actions()
        cache_axes(item)
        self.setMinimumSize(220, 120)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming)
        # QGraphicsView's own hint is 600x480 per plot: four of them asked for far more
        # than a laptop screen, and Qt's layouts then shrank the rows into each other.
        return QtCore.QSize(420, 210)

    # -- series ----------------------------------------------------------------
    def set_series(self, key: str, x: np.ndarray, y: np.ndarray, color: str, name: str | None = None,
                   dash: int = 0, width: float = 1.6, legend: bool = True) -> None:
        """``legend=False``: a faint curve behind the others (the raw samples behind their mean), without a
        legend entry and drawn without antialiasing (a third of a redraw's cost, and no one reads its edges).

        A curve of more points than ``SMOOTH_EDGES_UP_TO`` is drawn without antialiasing too: a noisy
        step curve of thousands of steps is a band of vertical strokes, and antialiasing them took
        40-80 ms a paint (the UI thread stalled); with a few hundred points the edges are what one sees."""
        curve = self._curves.get(key)
        if curve is None:
            pen = pg.mkPen(color, width=width, style=_DASHES[dash % len(_DASHES)])
            curve = LiveCurve(pen=pen, name=(name or key) if legend else None,
                              **({} if legend else {"antialias": False}))
            self.getPlotItem().addItem(curve)
            self._curves[key] = curve
        smooth_edges = legend and len(x) <= SMOOTH_EDGES_UP_TO
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
        if curve is not None:
            self.getPlotItem().removeItem(curve)
            self.legend.removeItem(curve)

    def clear_series(self) -> None:
        for key in list(self._curves):
            self.remove_series(key)

    # -- export ----------------------------------------------------------------
    def _add_export_actions(self) -> None:
        menu = self.getPlotItem().getViewBox().menu
        menu.addSeparator()
        self.export_actions: dict[str, QtGui.QAction] = {}
        for fmt in plot_export.FORMATS:
            action = menu.addAction(f"Export {fmt.upper()}…")
            action.triggered.connect(lambda _checked=False, f=fmt: self._export_interactive(f))
            self.export_actions[fmt] = action

    def _export_interactive(self, fmt: str) -> None:
        path = plot_export.ask_path(self, fmt, self.export_name, self.export_dir)
        if path:
            self.export_dir = str(Path(path).parent)
            self.export(fmt, path)

    def csv_rows(self):
        return [(key, x, y) for key, (x, y) in self._data.items()]

    def export(self, fmt: str, path: str | Path) -> Path | None:
        """Write the plot as ``fmt`` (png, svg or csv) to ``path``; emits sigExported or sigExportFailed."""
        try:
            out = plot_export.export_plot(self.getPlotItem(), fmt, path, lambda csv_path: plot_export.write_csv(
                self.csv_rows(), csv_path, self.x_name, self.y_name))
        except Exception as exc:  # a failed export is a message, never a crash
            self.sigExportFailed.emit(f"export to {path} failed: {type(exc).__name__}: {exc}")
            return None
        self.sigExported.emit(str(out))
        return out
