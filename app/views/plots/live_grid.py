"""LivePlotGrid: the Plots tab's plots from their definitions (app/views/plots/live_plots.py): the telemetry row above
(each per-device plot, or its heatmap in its place once the devices are many, and the devices to look at first
beside them: engine/record/outliers.py), the step plots below it, each row as wide as the panel."""
from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtWidgets

from app.views import theme
from app.views.plots.axes import RelativeTimeAxis, WholeNumberAxis
from app.views.plots.heatmap_plot import HeatmapPlot
from app.views.plots.live_plots import LIVE_PLOTS
from app.views.plots.outlier_list import OutlierList
from app.views.plots.series_plot import SeriesPlot
from engine.figures.figure import Axis

# Live telemetry's x values are seconds since the app started; its axis, its hover and its exports count
# back from now (SeriesPlot.x_origin).
LIVE_TIME = Axis("time from now", "s")
# Pixels a plot keeps however short the window: its title, legend row, axis and a data area to read (on a
# 1280x800 screen the utilization plot's data area was about 70 px, under its legend). Two rows of them,
# the timeline and the window's other parts still fit a 1366x768 laptop (the window's minimum height).
PLOT_MIN_HEIGHT = 135
HEAT_ROW_STRETCH = 3   # the telemetry row's height against the step plots' while it shows heatmaps
GRID_COLUMNS = 6   # the plots' grid: two telemetry plots of three columns, three step plots of two


class LivePlotGrid(QtWidgets.QGridLayout):
    def __init__(self, now: Callable[[], float], window_s: float, device_clicked: Callable[[str], None]):
        """``now``: the live x shown as 0; ``window_s``: the seconds of telemetry in view; ``device_clicked``:
        called with the device a heatmap row or the outlier list picks."""
        super().__init__()
        self.setSpacing(6)
        self.now, self.device_clicked = now, device_clicked
        self.series_plots: dict[str, SeriesPlot] = {}
        # In the telemetry plots' places, with many devices; made the first time they are shown (four plots'
        # worth of the window's start-up otherwise, for a view most runs never show).
        self.heatmaps: dict[str, HeatmapPlot] = {}
        self.time_axes: list[RelativeTimeAxis] = []
        self.telemetry_row = QtWidgets.QHBoxLayout()
        self.telemetry_row.setSpacing(6)
        self.addLayout(self.telemetry_row, 0, 0, 1, GRID_COLUMNS)
        telemetry = [spec for spec in LIVE_PLOTS if spec.per_device]
        for index, spec in enumerate(LIVE_PLOTS):
            # Telemetry scrolls in time; steps are whole (a 5-step run's axis must not read 2.5).
            axis = RelativeTimeAxis() if spec.per_device else WholeNumberAxis()
            plot = self.series_plots[spec.name] = SeriesPlot.of_frame(spec.figure, x_axis=axis)
            plot.setMinimumHeight(PLOT_MIN_HEIGHT)
            per_row = len(telemetry) if spec.per_device else len(LIVE_PLOTS) - len(telemetry)
            if spec.per_device:
                self.telemetry_row.addWidget(plot, 1)
                self.time_axes.append(axis)
                self._live_telemetry(plot, window_s)
            else:
                span = GRID_COLUMNS // per_row
                self.addWidget(plot, 1, (index - len(telemetry)) * span, 1, span)
            # A row no wider at its least than the two telemetry plots above it: the window fits a laptop.
            plot.setMinimumWidth(2 * plot.minimumWidth() // per_row)
        self.outliers = OutlierList()
        self.outliers.sigDeviceClicked.connect(device_clicked)
        self.outliers.setVisible(False)
        self.telemetry_row.addWidget(self.outliers)

    def _live_telemetry(self, plot: SeriesPlot, window_s: float) -> None:
        # A vertical grid would scroll with the time axis: costly to repaint, and noisy to watch.
        plot.getPlotItem().showGrid(x=False, y=True, alpha=theme.GRID_ALPHA)
        plot.getPlotItem().getAxis("left").setStyle(maxTickLevel=1)
        plot.set_axes(LIVE_TIME, plot.spec.y, origin=self.now)
        figure = plot.spec
        fixed = figure.y_range if figure.y_range and None not in figure.y_range else None
        if fixed:
            plot.setYRange(*fixed, padding=0.02)
        plot.getPlotItem().enableAutoRange(x=False, y=fixed is None)
        plot.getPlotItem().setXRange(-window_s, 0, padding=0)

    def make_heatmaps(self, live: bool = True) -> None:
        """The telemetry plots' heatmaps, each beside its plot (hidden until TelemetryRedraw shows them)."""
        for spec in LIVE_PLOTS:
            if not spec.per_device or spec.name in self.heatmaps:
                continue
            heat_axis = RelativeTimeAxis()
            heat_axis.now = self.time_axes[0].now
            heatmap = self.heatmaps[spec.name] = HeatmapPlot(spec.figure, x_axis=heat_axis)
            heatmap.x_origin = self.now if live else None
            heatmap.setMinimumHeight(PLOT_MIN_HEIGHT)
            heatmap.setVisible(False)
            heatmap.sigDeviceClicked.connect(self.device_clicked)
            plot = self.series_plots[spec.name]
            self.telemetry_row.insertWidget(self.telemetry_row.indexOf(plot) + 1, heatmap, 1)
            self.time_axes.append(heat_axis)

    def give_heatmaps_room(self, heat: bool) -> None:
        """Heatmaps take the telemetry row's greater part (a device's row is 3 px at least: HeatmapPlot), the
        step plots keeping their minimum height; lines share the rows evenly."""
        self.setRowStretch(0, HEAT_ROW_STRETCH if heat else 1)
        self.setRowStretch(1, 1)
