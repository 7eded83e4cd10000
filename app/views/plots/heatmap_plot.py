"""HeatmapPlot: utilization or memory of many devices, a row each, grouped by node, with each node's mean above.

From engine/figures/heatmap.py's HEATMAP_FROM devices on, the Plots tab draws the two telemetry plots this
way (64 lines and 64 legend entries cannot be read). Its cost is bounded by pixels: one image of devices x
columns (columns about a pixel wide; app/state/heat_columns.py keeps them incrementally), and a line per node.
A row is never shorter than ROW_PX: rows that do not fit the plot's place scroll under the means plot, which
carries the time axis for both (64 rows of a pixel each could not be told apart or pointed at).
The cursor names the device, time and value under it; a click on a row selects the device (its own series
is drawn over the node means, and the panel highlights it everywhere: ``sigDeviceClicked``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.views import theme
from app.views.plots import export as plot_export
from app.views.plots.hover import Found, Hover, quantity
from app.views.plots.series_plot import SeriesPlot, cache_axes
from engine.figures import Axis, Figure, palette
from engine.figures.figure import Heat
from engine.figures.heatmap import COLORMAP, as_cells, as_matrix, block_means, heat_of, mean_name, node_blocks

AXIS_WIDTH = 64          # px: the two plots' left axes, so their time axes line up
BAR_WIDTH = 58           # px: the colour scale at the right, and the room the means plot keeps beside it
SELECTED = "#ffffff"     # the selected device's line and outline
MEANS_PX = 80            # the means plot's height: its title, a band of lines and the time axis; rows get the rest
LABEL_PX = 13            # px a row label needs: where rows are shorter, every k-th node is named
ROW_PX = 3               # px a device's row has at least (8 devices a node: every node named)
ROWS_MARGIN = 4          # px above and below the rows inside their scrolled area


class HeatmapPlot(QtWidgets.QWidget):
    sigExported = QtCore.Signal(str)
    sigExportFailed = QtCore.Signal(str)
    sigDeviceClicked = QtCore.Signal(str)

    def __init__(self, frame: Figure, x_axis: pg.AxisItem | None = None,
                 parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.frame = frame
        self.export_name = frame.name
        self.export_dir = ""
        self.x_origin: Callable[[], float] | None = None   # live: the x shown as 0 (now)
        self.devices: list[str] = []
        self.selected: str | None = None
        self._matrix = np.empty((0, 0))
        self._x0, self._dx = 0.0, 1.0
        self._levels = (0.0, 0.0)   # none yet: the first data sets the scale
        self.figure: Figure | None = None    # a stored run's, as drawn by draw_figure

        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.means = SeriesPlot.of_frame(frame.with_data(y=Axis(frame.y.unit or "")), x_axis=x_axis)
        self.means.setFixedHeight(MEANS_PX)
        # A line per node, named by the cursor: a legend of 8-32 nodes would take the rows the lines need.
        self.means.legend.action.setChecked(False)
        means_item = self.means.getPlotItem()
        self._name_time_axis(frame.x.text)
        means_item.disableAutoRange()   # x follows the heatmap's, y its colour scale
        means_item.getAxis("left").setWidth(AXIS_WIDTH)
        means_item.showAxis("right")
        right = means_item.getAxis("right")
        right.setWidth(BAR_WIDTH)
        right.setStyle(showValues=False)
        right.setPen(pg.mkPen(None))
        self.means.to_figure = self.to_figure   # its context menu's exports are the whole heatmap's
        layout.addWidget(self.means)

        self.view = pg.PlotWidget(background=theme.PANEL)
        item = self.view.getPlotItem()
        item.setMouseEnabled(x=False, y=False)
        item.disableAutoRange()   # both ranges are set: the rows', and the window's (linked to the means')
        item.hideButtons()
        item.hideAxis("bottom")   # the means' above is both plots' time axis: it stays put while rows scroll
        item.getViewBox().invertY(True)
        item.getAxis("left").setWidth(AXIS_WIDTH)
        theme.mute_axes(item)
        self.view.getViewBox().setXLink(means_item.getViewBox())
        self.image = pg.ImageItem(axisOrder="row-major")
        item.addItem(self.image)
        levels = frame.y_range if None not in frame.y_range else (0.0, 1.0)
        self.bar = pg.ColorBarItem(values=levels, colorMap=pg.colormap.get(COLORMAP), interactive=False,
                                   width=10)
        self.bar.setImageItem(self.image, insert_in=item)
        self.bar.setFixedWidth(BAR_WIDTH)
        self._dividers: list[pg.InfiniteLine] = []
        self._outline = pg.PlotCurveItem(pen=pg.mkPen(SELECTED, width=1.5))
        self._outline.setZValue(10)
        item.addItem(self._outline, ignoreBounds=True)
        self.view.export_name, self.view.export_dir = self.export_name, ""
        self.view.export = self.export
        self.export_actions = plot_export.add_export_actions(self.view)
        self.hover = Hover(self.view, self.cell_at, marker=False)
        self.view.scene().sigMouseClicked.connect(self._clicked)
        self.view.getViewBox().sigResized.connect(self._label_rows)
        cache_axes(item)
        self.rows_area = QtWidgets.QScrollArea()
        self.rows_area.setWidgetResizable(True)
        self.rows_area.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.rows_area.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.rows_area.setWidget(self.view)
        self.rows_area.viewport().installEventFilter(self)
        layout.addWidget(self.rows_area, 1)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming; see SeriesPlot.sizeHint)
        return QtCore.QSize(420, 210)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802  (Qt naming)
        """The rows' viewport resized (a scroll bar shown or hidden): the means plot keeps the scroll bar's
        width free at its right too, so the two plots' time axes stay one above the other."""
        if event.type() == QtCore.QEvent.Type.Resize and watched is self.rows_area.viewport():
            bar = self.rows_area.width() - self.rows_area.viewport().width()
            self.means.getPlotItem().getAxis("right").setWidth(BAR_WIDTH + bar)
        return False

    def _name_time_axis(self, text: str) -> None:
        """The time axis's name in its tooltip and the cursor's text, not under it: its line is the rows'."""
        axis = self.means.getPlotItem().getAxis("bottom")
        axis.showLabel(False)
        axis.setToolTip(text)

    def pixels(self) -> int:
        """The heatmap's width in pixels: its columns need be no narrower."""
        return max(int(self.view.getViewBox().width()), 100)

    # -- rows ----------------------------------------------------------------------
    def set_devices(self, devices: list[str]) -> None:
        """The rows, top down: node by node, each node's name beside its block (one machine: the devices')."""
        if devices == self.devices:
            return
        self.devices = list(devices)
        item = self.view.getPlotItem()
        for line in self._dividers:
            item.removeItem(line)
        self._dividers = []
        blocks = node_blocks(self.devices)
        for _, first, _ in blocks[1:]:
            line = pg.InfiniteLine(first - 0.5, angle=0, pen=pg.mkPen(theme.PANEL, width=2))
            item.addItem(line, ignoreBounds=True)
            self._dividers.append(line)
        self.view.setMinimumHeight(ROW_PX * len(self.devices) + 2 * ROWS_MARGIN)
        self._label_rows()
        item.setYRange(-0.5, max(len(self.devices), 1) - 0.5, padding=0)
        if self.selected not in self.devices:
            self.select(None)

    def _label_rows(self, *_args) -> None:
        """Each node's name beside its block (one machine: the devices'), as many as fit: every k-th where
        the rows are too short for all (64 rows in a 1280x800 window are 75 pixels)."""
        blocks = node_blocks(self.devices)
        labels = [(first + (rows - 1) / 2, node) for node, first, rows in blocks] if len(blocks) > 1 else \
            [(i, name) for i, name in enumerate(self.devices)]
        pixels = self.view.getViewBox().height() or 100.0
        every = max(1, math.ceil(LABEL_PX * len(labels) / pixels))
        self.view.getPlotItem().getAxis("left").setTicks([labels[::every], []])

    # -- data ----------------------------------------------------------------------
    def show_columns(self, devices: list[str], matrix: np.ndarray, x0: float, dx: float,
                     levels: tuple[float, float], x_range: tuple[float, float] | None = None) -> None:
        """Live: each device's column means (rows of ``matrix``), columns from ``x0``, ``dx`` wide."""
        self.figure = None
        self.set_devices(devices)
        moved = levels != self._levels
        self._matrix, self._x0, self._dx, self._levels = matrix, x0, dx, levels
        self.image.setImage(matrix, autoLevels=False, levels=levels)
        self.image.setRect(QtCore.QRectF(x0, -0.5, dx * matrix.shape[1], len(devices)))
        if moved:   # the scale's ticks repaint only when they change
            self.bar.setLevels(levels)
            self.means.getPlotItem().setYRange(*levels, padding=0.05)
            # A short plot: its scale's two ends are all it has room to say.
            self.means.getPlotItem().getAxis("left").setTicks([[(v, f"{v:g}") for v in levels], []])
        blocks = node_blocks(self.devices)
        wanted = {mean_name(node) for node, _, _ in blocks}
        for key in [k for k in self.means.series_keys() if k not in wanted and k != "selected"]:
            self.means.remove_series(key)
        # The range (linked to the means') moves inside the means' frame: their curves are clipped once.
        with self.means.frame():
            if x_range is not None:
                self.view.getPlotItem().setXRange(*x_range, padding=0)
            self._draw_means(blocks)

    def _draw_means(self, blocks: list) -> None:
        centers = self._x0 + self._dx * (np.arange(self._matrix.shape[1]) + 0.5)
        means = block_means(self._matrix, blocks) if len(self._matrix) else []
        for k, ((node, _, _), mean) in enumerate(zip(blocks, means, strict=False)):
            self.means.set_plain_series(mean_name(node), centers, mean, palette.series_color(k))
        self._draw_selected(centers)

    def _draw_selected(self, centers: np.ndarray) -> None:
        if self.selected is None or self.selected not in self.devices:
            if self.means.has_series("selected"):
                self.means.remove_series("selected")
            self._outline.setData([], [])
            return
        row = self.devices.index(self.selected)
        if self.means.has_series("selected") and self.means.series_name("selected") != self.selected:
            self.means.remove_series("selected")   # another device's: named anew
        if len(self._matrix):
            self.means.set_plain_series("selected", centers, self._matrix[row], SELECTED, self.selected, width=1.2)
        left, right = self._x0, self._x0 + self._dx * max(self._matrix.shape[1], 1)
        self._outline.setData([left, right, right, left, left], [row - 0.5, row - 0.5, row + 0.5, row + 0.5, row - 0.5])

    def select(self, device: str | None) -> None:
        """Outline ``device``'s row and draw its series over the node means (None: neither)."""
        self.selected = device
        centers = self._x0 + self._dx * (np.arange(self._matrix.shape[1]) + 0.5)
        self._draw_selected(centers)

    def go_live(self, origin: Callable[[], float]) -> None:
        """Back to the live view after a stored run: its x counted back from now, its own title and label."""
        self.figure = None
        self.x_origin = origin
        self.means.show_title(self.frame.title)
        self._name_time_axis(self.frame.x.text)

    def clear(self) -> None:
        self.show_columns([], np.empty((0, 0)), 0.0, 1.0, self._levels)

    def draw_figure(self, figure: Figure) -> None:
        """A stored run's heatmap (engine/figures/heatmap.py heat_figure)."""
        heat = figure.heat
        matrix = as_matrix(heat.values)
        self.x_origin = None
        self._name_time_axis(figure.x.text)
        self.means.show_title(figure.title)
        self.show_columns(list(heat.devices), matrix, heat.x0, heat.dx, (heat.low, heat.high),
                          x_range=(heat.x0, heat.x0 + heat.dx * max(heat.columns, 1)))
        self.figure = figure

    # -- cursor --------------------------------------------------------------------
    def cell_at(self, x: float, y: float) -> Found | None:
        row, column = int(round(y)), int(np.floor((x - self._x0) / self._dx)) if self._dx else -1
        if not (0 <= row < len(self.devices) and 0 <= column < self._matrix.shape[1]):
            return None
        value = self._matrix[row, column]
        shown_x = x - self.x_origin() if self.x_origin is not None else x
        text = "\n".join([self.devices[row], quantity(self.frame.x.label if self.x_origin is None else "time from now",
                                                       shown_x, "s"),
                          quantity(self.frame.y.label, value if np.isfinite(value) else None, self.frame.y.unit)])
        return Found(text, x, float(row))

    def device_at(self, scene_pos: QtCore.QPointF) -> str | None:
        at = self.view.getViewBox().mapSceneToView(scene_pos)
        row = int(round(at.y()))
        return self.devices[row] if 0 <= row < len(self.devices) else None

    def _clicked(self, event) -> None:
        if event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        if not self.view.getViewBox().sceneBoundingRect().contains(event.scenePos()):
            return   # the axis or the colour scale
        device = self.device_at(event.scenePos())
        if device is not None:
            self.select(None if device == self.selected else device)
            self.sigDeviceClicked.emit(self.selected or "")

    # -- export --------------------------------------------------------------------
    def to_figure(self) -> Figure:
        """What it shows as a figure definition: the stored run's, or the live columns (x from now)."""
        if self.figure is not None:
            return self.figure
        origin = self.x_origin() if self.x_origin is not None else 0.0
        values = as_cells(self._matrix)
        x = Axis("time from now", "s") if self.x_origin is not None else self.frame.x
        return heat_of(self.frame.with_data(x=x), Heat(list(self.devices), self._x0 - origin, self._dx, values,
                                                        *self._levels))

    def export(self, fmt: str, path: str | Path) -> Path | None:
        return plot_export.export_widget(self, fmt, path)
