"""SeriesPlot: one pyqtgraph plot of named series, with PNG/SVG/PDF/CSV export in its context menu.

It draws a figure definition (engine.figures: series, marks, axes, title) as
the exports draw it, or live series handed to it one by one; either way its
export is a figure definition drawn by the exports' backend (plots/export.py).
A value of no number in a series (NaN: a gap, engine/figures/gaps.py) breaks
its line, as it does in the exports. The legend has a row of its own above the
curves (legend.py); the cursor's point is named beside it (hover.py).
"""
from __future__ import annotations

import contextlib
import html
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.views import theme
from app.views.plots import export as plot_export
from app.views.plots.hover import Found, Hover, quantity
from app.views.plots.legend import LegendRow
from app.views.plots.live_curve import LiveCurve
from app.views.plots.peak_curve import NO_GAPS, PeakCurve, unwrapped
from app.views.plots.series_arrays import drawn, floats, keep_a_constant_readable
from engine.figures import Axis, Figure, Series, palette, series_table
from engine.figures.gaps import broken
from engine.figures.label_rows import label_rows
from engine.figures.numbers import format_value, is_number

MARK_SYMBOL_SIZE = 16  # the ring at a mark's point (the best of a sweep)
TITLE_HEIGHT = 22      # pixels of the title's row (pyqtgraph's 30 is a legend line's worth of curves)
HOVER_PX = 40          # the cursor names a point this many pixels away at most
MARK_GAP_PX = 6        # between two marks' labels in one row
LABEL_SHARE = 0.6      # of a view's height that marks' label rows may take (they have no background)


SMOOTH_EDGES_UP_TO = 1000  # points: above, a curve is drawn without antialiasing (see set_series)


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
                 parent: QtWidgets.QWidget | None = None, x_axis: pg.AxisItem | None = None):
        super().__init__(parent=parent, background=theme.PANEL,
                         axisItems={"bottom": x_axis} if x_axis is not None else None)
        self.export_name = export_name
        self.export_dir = ""
        self.spec = Figure(export_name, title, Axis(x_label, x_units), Axis(y_label, y_units))
        self.figure: Figure | None = None   # the definition drawn by draw_figure, until live series replace it
        # What shows in this plot's place while it is hidden (a heatmap of many devices): exported as this.
        self.stand_in = None
        self.emphasized: str | None = None  # a series drawn wider (a device picked elsewhere)
        # The x shown as 0 (live: now), as a function: the live axis counts back from a moving now.
        self.x_origin: Callable[[], float] | None = None
        item = self.getPlotItem()
        self.show_title(title)
        self.set_axes(self.spec.x, self.spec.y)
        item.showGrid(x=True, y=True, alpha=theme.GRID_ALPHA)
        theme.mute_axes(item)
        # The two settings that bound the cost of long histories (pyqtgraph's
        # scrollingPlots example): draw at most ~one point per pixel column,
        # keeping peaks, and skip what lies outside the visible x range.
        item.setDownsampling(auto=True, mode="peak")
        item.setClipToView(True)
        item.setMenuEnabled(True)
        item.hideButtons()
        self.legend = LegendRow(item)
        self._curves: dict[str, LiveCurve | PeakCurve | pg.PlotCurveItem] = {}
        self.long_series = False   # live telemetry: its curves are PeakCurves (set_series)
        self._data: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._gaps: dict[str, np.ndarray | None] = {}   # a PeakCurve's breaks, as indices (set_series)
        self._styles: dict[str, dict] = {}        # how each curve was drawn: its export draws it so
        self._extras: list[pg.GraphicsObject] = []  # a figure's marks and error bars
        self._mark_lines: list[pg.InfiniteLine] = []
        menu = item.getViewBox().menu
        self.legend.action = menu.addAction("Show legend")
        self.legend.action.setCheckable(True)
        self.legend.action.setChecked(True)
        self.legend.action.toggled.connect(self.legend.setVisible)
        self.export_actions = plot_export.add_export_actions(self)
        self.hover = Hover(self, self.point_at)
        item.getViewBox().sigResized.connect(self._stack_marks)
        cache_axes(item)
        self.setMinimumSize(220, 120)

    @classmethod
    def of_frame(cls, frame: Figure, parent: QtWidgets.QWidget | None = None,
                 x_axis: pg.AxisItem | None = None) -> SeriesPlot:
        """A plot titled and labelled as the figure ``frame`` (engine.figures) is: live or exported, one name."""
        plot = cls(frame.title, frame.y.label, frame.y.unit, x_label=frame.x.label, x_units=frame.x.unit,
                   export_name=frame.name, parent=parent, x_axis=x_axis)
        plot.spec = frame
        return plot

    def show_title(self, title: str) -> None:
        """The title, cut with an ellipsis to the plot's width (whole in its tooltip): a longer one widened the
        plot's scene past its view, and the right of the plot was lost (the Memory tab's at 1280x800)."""
        self.full_title, item, font = title, self.getPlotItem(), QtGui.QFont(self.font().family(), 10)
        room = max(60, self.width() - item.getAxis("left").width() - 32)   # the title spans the plot, not its axis
        shown = QtGui.QFontMetrics(font).elidedText(title, QtCore.Qt.TextElideMode.ElideRight, room)
        if (title, shown) == getattr(self, "shown_title", None):
            return   # a resize that leaves the title as it is: no relayout
        self.shown_title = (title, shown)
        item.setTitle(f"<span style='color:{theme.FOREGROUND};font-size:10pt'>{html.escape(shown)}</span>")
        item.titleLabel.setToolTip(title if shown != title else "")
        item.layout.setRowFixedHeight(0, TITLE_HEIGHT)

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt naming)
        if getattr(self, "full_title", None) is not None and self.getPlotItem() is not None:
            self.show_title(self.full_title)   # first: the view then fits the plot to its new width
        super().resizeEvent(event)

    def set_axes(self, x: Axis, y: Axis, origin: Callable[[], float] | None = None) -> None:
        """The axes' labels, units in brackets as the exports print them. ``origin``: the x value the axis
        shows as 0 (live: now; the data's x counts from the app's start), which exports and hover use too."""
        self.spec = self.spec.with_data(x=x, y=y)
        self.x_origin = origin
        item = self.getPlotItem()
        item.setLabel("left", y.text, color=theme.MUTED)
        item.setLabel("bottom", x.text, color=theme.MUTED)

    def shown_x(self, x: float) -> float:
        """A data x as the axis shows it (live: seconds from now)."""
        return x - self.x_origin() if self.x_origin is not None else x

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming)
        # QGraphicsView's own hint is 600x480 per plot: four of them asked for far more
        # than a laptop screen, and Qt's layouts then shrank the rows into each other.
        return QtCore.QSize(420, 210)

    # -- series ----------------------------------------------------------------
    def set_plain_series(self, key: str, x: np.ndarray, y: np.ndarray, color: str, name: str | None = None,
                         width: float = 1.6) -> None:
        """A short curve (a few hundred points: a heatmap's node means) as a bare PlotCurveItem: no clipping
        or downsampling to redo, an eighth of a PlotDataItem's cost an update; named by the hover as any."""
        curve = self._curves.get(key)
        if curve is None:
            curve = pg.PlotCurveItem(pen=pg.mkPen(color, width=width * (3 if key == self.emphasized else 1)),
                                     name=name or key, antialias=True)
            self.getPlotItem().addItem(curve)
            self._curves[key] = curve
            self._styles[key] = {"name": name or key, "color": color, "dash": 0, "width": width, "faint": False}
            self.legend.add(key, name or key, color, 0)
        self._data[key] = (x, y)
        x, y, connect = drawn(x, y)
        curve.setData(x, y, connect=connect)

    def set_series(self, key: str, x: np.ndarray, y: np.ndarray, color: str, name: str | None = None,
                   dash: int = 0, width: float = 1.6, faint: bool = False, peaks: bool | None = None,
                   gaps: np.ndarray | None = None) -> None:
        """``faint``: the raw samples behind their mean, translucent, without a legend entry and drawn without
        antialiasing (a third of a redraw's cost, and no one reads its edges). ``peaks``: drawn as a PeakCurve
        (app/views/plots/peak_curve.py; the plot's ``long_series`` if None) once it has two points. ``gaps``:
        the indices with no line to the next sample (engine/figures/gaps.py gap_after), where ``y`` has no NaN
        put between them (a PeakCurve breaks there without copying the series).

        A curve of more points than ``SMOOTH_EDGES_UP_TO`` is drawn without antialiasing too: a noisy
        step curve of thousands of steps is a band of vertical strokes, and antialiasing them took
        40-80 ms a paint (the UI thread stalled); with a few hundred points the edges are what one sees."""
        peaks = (self.long_series if peaks is None else peaks) and len(x) >= 2   # a lone point is a dot
        curve = self._curves.get(key)
        if curve is not None and isinstance(curve, PeakCurve) != peaks:
            self.getPlotItem().removeItem(curve)   # it grew past one point: its legend entry stays
            curve = None
        if curve is None:
            style = palette.DASHES[dash % len(palette.DASHES)]
            pen = pg.mkPen(palette.rgba(color, palette.FAINT_ALPHA) if faint else color,
                           width=width * (3 if key == self.emphasized else 1))
            if style is not None:
                pen.setDashPattern([float(v) for v in style])
            kind = PeakCurve if peaks else LiveCurve
            curve = kind(pen=pen, name=None if faint else (name or key), **({"antialias": False} if faint else {}))
            curve.setZValue(10 if key == self.emphasized else 0)
            self.getPlotItem().addItem(curve)
            self._curves[key] = curve
            self._styles[key] = {"name": name or key, "color": color, "dash": dash, "width": width, "faint": faint}
            if not faint:
                self.legend.add(key, name or key, color, dash)
        smooth_edges = not faint and len(x) <= SMOOTH_EDGES_UP_TO
        if peaks:
            self._data[key] = (x, y)
            self._gaps[key] = gaps
            curve.opts["antialias"] = smooth_edges
            curve.set_whole(x, y, gaps)
            return
        if gaps is not None and len(gaps):
            x, y = broken(x, y, gaps)
        self._data[key] = (x, y)
        self._gaps.pop(key, None)
        if curve.curve.opts.get("antialias") != smooth_edges:
            curve.opts["antialias"] = curve.curve.opts["antialias"] = smooth_edges  # the curve paints with it
        x, y, connect = drawn(x, y)
        # A line needs two points: a one-step run, or a short run's one memory sample,
        # would show nothing. Such series are drawn as dots until they grow.
        lone = len(x) < 2
        if lone != (curve.opts.get("symbol") is not None):
            curve.setSymbol("o" if lone else None)
            curve.setSymbolSize(6)
            curve.setSymbolBrush(curve.opts["pen"].color())
            curve.setSymbolPen(None)
        curve.setData(x, y, connect=connect)

    def draw_figure(self, figure: Figure) -> None:
        """Show a figure definition: its series (gaps left out), error bars, marks, axes and y range."""
        self.clear_series()
        self.show_title(figure.title)  # it may say what it holds: "(1 step in 40 of 200,000)", "· 2 runs"
        self.set_axes(figure.x, figure.y)
        item = self.getPlotItem()
        for s in figure.series:
            x, y, err = floats(s)
            # peaks=False: a figure's x range is auto-ranged from its curves' bounds, and a PeakCurve's bounds are
            # those of the range in view (one sample beyond each side): the two would widen each other a sample
            # at a time (a stored long run's plots hung in CI's paint); live plots set their x range themselves.
            self.set_series(s.name, x, y, s.color, s.name, dash=s.dash, width=s.width, faint=s.faint, peaks=False)
            if s.markers:
                curve = self._curves[s.name]
                curve.setSymbol("o")
                curve.setSymbolBrush(pg.mkBrush(s.color))
                curve.setSymbolSize(7)
            if err is not None and np.any(err > 0):
                has = np.isfinite(y)
                self._add_extra(pg.ErrorBarItem(x=x[has], y=y[has], height=2 * err[has], beam=0.0,
                                                pen=pg.mkPen(s.color, width=1.2)))
        for mark in figure.marks:
            line = pg.InfiniteLine(pos=float(mark.x), angle=90, movable=False,
                                   pen=pg.mkPen(mark.color, style=QtCore.Qt.PenStyle.DashLine),
                                   label=mark.label, labelOpts={"color": mark.color, "position": 0.92,
                                                                "anchors": [(0, 0), (0, 0)]})
            self._add_extra(line)
            self._mark_lines.append(line)
            if is_number(mark.y):
                self._add_extra(pg.ScatterPlotItem([mark.x], [mark.y], symbol="o", size=MARK_SYMBOL_SIZE,
                                                   brush=None, pen=pg.mkPen(mark.color, width=2)))
        self._stack_marks()
        keep_a_constant_readable(item.getViewBox(), self._data.values())
        item.enableAutoRange()
        low, high = figure.y_range
        if is_number(low) and is_number(high):
            item.enableAutoRange(y=False)
            item.setYRange(low, high, padding=0.02)
        self.figure = figure

    def _add_extra(self, extra: pg.GraphicsObject) -> None:
        self.getPlotItem().addItem(extra)
        self._extras.append(extra)

    def _stack_marks(self, *_args) -> None:
        """The marks' labels in rows from the top, never over each other (engine/figures/label_rows.py)."""
        stack_labels(self.getPlotItem().getViewBox(), self._mark_lines)

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
            for curve in list(self._curves.values()):
                curve.hold = False
                if getattr(curve, "range_dirty", False):   # a plain curve (set_plain_series) has none
                    curve.range_dirty = False
                    curve.viewRangeChanged()
            # Auto-range now, from the curves as drawn: left to the paint, the new range would move the axes
            # during the paint and the view would paint twice (a y range change redraws no PeakCurve).
            keep_a_constant_readable(view, self._data.values())
            view.updateAutoRange()
            # Apply the new range to the view's transform now, for the same reason.
            view.updateMatrix()

    def emphasize(self, key: str | None) -> None:
        """Draw series ``key`` three times as wide as it was (None: none), over the others."""
        for name in {self.emphasized, key} - {None}:
            curve = self._curves.get(name)
            if curve is not None:
                pen = pg.mkPen(curve.opts["pen"])
                pen.setWidthF(self._styles[name]["width"] * (3 if name == key else 1))
                curve.setPen(pen)
                curve.setZValue(10 if name == key else 0)
        self.emphasized = key

    def has_series(self, key: str) -> bool:
        return key in self._curves

    def series_name(self, key: str) -> str | None:
        """The legend's name for a series (None: drawn without a legend entry)."""
        return self._curves[key].name()

    def legend_names(self) -> list[str]:
        return self.legend.names()

    def series_keys(self) -> list[str]:
        return list(self._curves)

    def series_data(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """A series' x and y, NaN at each break (engine/figures/gaps.py); a live series as it was handed over
        (a ring buffer's view, some of it since written over: peak_curve.unwrapped)."""
        x, y = self._data[key]
        gaps = self._gaps.get(key)
        if key not in self._gaps:
            return x, y
        x, y, gaps = unwrapped(x, y, NO_GAPS if gaps is None else np.asarray(gaps, dtype=np.intp))
        return broken(x, y, gaps) if len(gaps) else (x, y)

    def point_count(self) -> int:
        """Points measured (the breaks at gaps are none)."""
        return sum(int(np.count_nonzero(np.isfinite(y))) for _, y in self._data.values())

    def remove_series(self, key: str) -> None:
        curve = self._curves.pop(key, None)
        self._data.pop(key, None)
        self._gaps.pop(key, None)
        self._styles.pop(key, None)
        self.legend.remove(key)
        if curve is not None:
            self.getPlotItem().removeItem(curve)

    def clear_series(self) -> None:
        for key in list(self._curves):
            self.remove_series(key)
        for extra in self._extras:
            self.getPlotItem().removeItem(extra)
        self._extras = []
        self._mark_lines = []
        keep_a_constant_readable(self.getPlotItem().getViewBox(), ())   # a new run's range is its own
        if self.figure is not None:
            self.show_title(self.spec.title)
        self.figure = None

    # -- hover -----------------------------------------------------------------
    def point_at(self, x: float, y: float) -> Found | None:
        """The point nearest the view position (x, y), named with its x and y and their units: a curve's
        (its mean, over the faint raw samples), or a bar's. None when nothing is within HOVER_PX pixels."""
        figure = self.figure
        if figure is not None and figure.bars is not None:
            return self._bar_at(figure, x)
        pixel_x, pixel_y = self.getPlotItem().getViewBox().viewPixelSize()
        keys = [k for k in self._data if not self._styles[k]["faint"]] or list(self._data)
        best = None
        for key in keys:
            xs, ys = self._data[key]
            i = int(np.searchsorted(xs, x))
            for j in range(max(0, i - 2), min(len(xs), i + 2)):
                if np.isfinite(ys[j]):
                    distance = ((xs[j] - x) / pixel_x) ** 2 + ((ys[j] - y) / pixel_y) ** 2
                    if best is None or distance < best[0]:
                        best = (distance, key, float(xs[j]), float(ys[j]))
        if best is None or best[0] > HOVER_PX ** 2:
            return None
        _, key, px, py = best
        axes = self.spec if figure is None else figure
        text = "\n".join([self._styles[key]["name"], quantity(axes.x.label, self.shown_x(px), axes.x.unit),
                          quantity(axes.y.label, py, axes.y.unit)])
        return Found(text, px, py)

    def _bar_at(self, figure: Figure, x: float) -> Found | None:
        """Bars stand at 0, 1, 2, ... in the order of those with a value (experiment_results.StepTimeBars)."""
        bars = figure.bars
        errors = list(bars.errors or []) + [None] * len(bars.labels)
        drawn = [(label, value, errors[i])
                 for i, (label, value) in enumerate(zip(bars.labels, bars.values, strict=True)) if is_number(value)]
        i = int(round(x))
        if not drawn or not 0 <= i < len(drawn) or abs(x - i) > 0.4:
            return None
        label, value, error = drawn[i]
        text = quantity(figure.y.label, value, figure.y.unit)
        if is_number(error):
            text += f" ± {format_value(error)}"
        return Found(f"{label}\n{text}", float(i), float(value))

    # -- export ----------------------------------------------------------------
    def to_figure(self) -> Figure:
        """What this plot shows, as a figure definition: the one it drew, or its curves as they are now, on
        the axis the screen shows (live: seconds from now); a gap's break stays a break."""
        if self.stand_in is not None:
            return self.stand_in.to_figure()
        if self.figure is not None:
            return self.figure
        origin = self.x_origin() if self.x_origin is not None else 0.0
        series = [Series(x=(np.asarray(x, dtype=float) - origin).tolist(),
                         y=[v if np.isfinite(v) else None for v in np.asarray(y, dtype=float).tolist()],
                         **self._styles[key])
                  for key, (x, y) in ((key, self.series_data(key)) for key in self._data)]
        columns, rows = series_table(series, self.spec.x, self.spec.y)
        return self.spec.with_data(series=series, columns=columns, rows=rows)

    def export(self, fmt: str, path: str | Path) -> Path | None:
        """Write the plot as ``fmt`` (png, svg, pdf or csv) to ``path``; emits sigExported or sigExportFailed."""
        return plot_export.export_widget(self, fmt, path)


def stack_labels(view: pg.ViewBox, lines: list[pg.InfiniteLine], rows: int = 3) -> None:
    """Vertical lines' labels in rows from the top of ``view``, each row a label's height lower, so that no
    two overprint (engine/figures/label_rows.py); a label with no free row is hidden (its line stays)."""
    if not lines:
        return
    height = view.height() or 120.0
    sizes = [line.label.boundingRect() for line in lines]
    row_px = math.ceil(max(size.height() for size in sizes)) + 1   # a pixel between rows
    rows = max(1, min(rows, int(LABEL_SHARE * height // row_px)))   # the data must show below them
    pixel = view.viewPixelSize()[0] or 1.0
    xs = [line.value() for line in lines]
    widths = [(size.width() + MARK_GAP_PX) * pixel for size in sizes]
    for line, row in zip(lines, label_rows(xs, widths, rows), strict=True):
        line.label.setVisible(row is not None)
        if row is not None:
            line.label.setPosition(1.0 - (1 + row * row_px) / height)
