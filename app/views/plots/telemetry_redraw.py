"""The live telemetry plots' redraw: a line per device, or a heatmap once the devices are many.

PlotPanel (panel.py) calls ``redraw`` on its telemetry tick. Up to HEATMAP_FROM devices
(engine/figures/heatmap.py) each utilization plot draws a line per device (its raw samples faint, their
one-second mean over them, its core's total and SM activity beside it), handing pyqtgraph only the
buffers that changed; from there on each plot is a HeatmapPlot fed with column means
(app/state/heat_columns.py), whose cost is bounded by its pixels, not by devices x samples.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.state.heat_columns import HeatColumns
from app.state.live_data import TelemetryHistory, TrailingMeans
from app.views.plots.heatmap_plot import HeatmapPlot
from app.views.plots.live_plots import LivePlot
from app.views.plots.series_plot import SeriesPlot
from engine.devices import node_groups
from engine.figures import palette
from engine.figures.gaps import gap_after
from engine.figures.heatmap import round_up, uses_heatmap
from engine.telemetry.smooth import core_total_apart

RAW_PREFIX = "raw "  # the key of a utilization series' faint raw samples
CORE_PREFIX = "core total "  # the key of a run's CPU device's whole-core reading, where it departs from its own
SM_PREFIX = "SM activity "   # the key of a GPU's GPM SM activity, dotted beside its utilization
CORE_CHECKED = 64  # the newest samples a redraw compares for it
PREFIXES = ("", RAW_PREFIX, CORE_PREFIX, SM_PREFIX)


class TelemetryRedraw:
    """Draws the live telemetry of ``telemetry`` into ``lines`` (a SeriesPlot per LivePlot) or, with many
    devices, into ``heatmaps`` (a HeatmapPlot per LivePlot, in the same place)."""

    def __init__(self, telemetry: TelemetryHistory, specs: list[LivePlot], lines: dict[str, SeriesPlot],
                 heatmaps: dict[str, HeatmapPlot], on_heat: Callable[[bool], None] = lambda heat: None,
                 make_heatmaps: Callable[[], None] = lambda: None):
        """``on_heat``: told when the plots turn to heatmaps and back (the panel gives them more room);
        ``make_heatmaps``: fills ``heatmaps`` the first time they are shown."""
        self.make_heatmaps = make_heatmaps
        self.telemetry = telemetry
        self.on_heat = on_heat
        self.specs = specs
        self.lines, self.heatmaps = lines, heatmaps
        for plot in lines.values():
            plot.long_series = True   # an hour of every device's samples: drawn as PeakCurves
        self.heat = False                     # drawn as heatmaps now
        self.highlighted: str | None = None   # a device picked in a heatmap or the outlier list
        self._drawn: dict[tuple[str, str], int] = {}
        self._means: dict[str, TrailingMeans] = {}  # per utilization series, kept across redraws
        self._columns = {spec.name: HeatColumns() for spec in specs}

    def reset(self) -> None:
        """Everything is drawn anew at the next redraw (the live view came back)."""
        self._drawn.clear()
        for plot in self.lines.values():
            plot.clear_series()

    def set_heat(self, heat: bool) -> None:
        """Lines or heatmaps in the plots' places; an export of a line plot exports what is shown."""
        if heat == self.heat:
            return
        self.heat = heat
        if heat:
            self.make_heatmaps()
        for name, plot in self.lines.items():
            plot.setVisible(not heat)
            if name in self.heatmaps:
                self.heatmaps[name].setVisible(heat)
            plot.stand_in = self.heatmaps[name] if heat else None
        self.on_heat(heat)
        if not heat:
            self._drawn.clear()

    def highlight(self, device: str | None) -> None:
        """Outline ``device``'s row in the heatmaps (and draw its series), or widen its line; a run's CPU
        device is its core's row in utilization (what it measures) and its own in memory."""
        self.highlighted = device
        for spec in self.specs:
            row = self._row_key(spec, device) if device else None
            heatmap = self.heatmaps.get(spec.name)
            if heatmap is not None:   # a stored run's rows are its devices' own names
                heatmap.select(row if row in heatmap.devices else device if device in heatmap.devices else None)
            self.lines[spec.name].emphasize(row)

    def run_device(self, key: str) -> str:
        """The run's device a heatmap row or series key stands for ("core 0" -> "cpu:0" while a run uses it)."""
        return next((d for d, physical in self.telemetry.physical.items() if physical == key), key)

    def _row_key(self, spec: LivePlot, device: str) -> str:
        """A run's device's key in ``spec``'s buffers: utilization is kept per physical device (its core)."""
        return self.telemetry.physical.get(device, device) if spec.named_by_run else device

    def redraw(self, window_start: float, now: float, force: bool, run_devices: list[str] | None = None) -> int:
        """The plots' data for the window ``window_start`` .. ``now``; returns the series (or heatmaps) updated.
        Heatmaps from HEATMAP_FROM devices: the run's (``run_devices``), else the devices sampled other than
        this machine's idle cores (a 16-core desktop's cores are lines, as they always were)."""
        devices = list(run_devices or [d for d in self.telemetry.devices if not d.startswith("core ")])
        self.set_heat(uses_heatmap(len(devices)))
        if self.heat:
            ordered = [name for _, names in node_groups(devices) for name in names]
            return self._redraw_heatmaps(ordered, window_start, now)
        return sum(self._redraw_lines(spec, window_start, now, force) for spec in self.specs)

    def _redraw_heatmaps(self, devices: list[str], window_start: float, now: float) -> int:
        period = 1.0 / self.telemetry.rate_hz
        for spec in self.specs:
            heatmap = self.heatmaps[spec.name]
            rows = list(dict.fromkeys(self._row_key(spec, d) for d in devices))
            matrix, x0, dx = self._columns[spec.name].matrix(spec.data(self.telemetry), rows, window_start, now,
                                                            heatmap.pixels(), period)
            matrix *= spec.scale
            low, high = spec.figure.y_range
            if high is None:   # memory: up to the most any device holds, rounded up (see round_up)
                finite = matrix[np.isfinite(matrix)]
                high = round_up(float(finite.max())) if finite.size else 1.0
            heatmap.show_columns(rows, matrix, x0, dx, (low or 0.0, high), x_range=(window_start, now))
        return len(self.specs)

    def _redraw_lines(self, spec: LivePlot, window_start: float, now: float, force: bool) -> int:
        updated = 0
        telemetry = self.telemetry
        period = 1.0 / telemetry.rate_hz   # the sampler's (a late sample is a gap from MIN_GAP_S on anyway)
        plot, buffers = self.lines[spec.name], spec.data(telemetry)
        # The range moves first, then the changed data comes: one pass per curve.
        with plot.frame():
            plot.getPlotItem().setXRange(window_start, now, padding=0)
            for device in buffers:
                buf = buffers[device]
                key = (spec.name, device)
                if not len(buf):
                    continue
                last = buf.last(0)
                if last is not None and last < window_start:
                    # Nothing in the window: drop the curve (and its legend entry) until data returns.
                    self._remove(plot, device)
                    self._drawn.pop(key, None)
                    continue
                label = telemetry.label(device) if spec.named_by_run else device
                if plot.has_series(device) and plot.series_name(device) != label:
                    # a run began or ended on this device: renamed, and coloured as its run's device
                    self._remove(plot, device)
                    self._drawn.pop(key, None)
                if force or self._drawn.get(key) != buf.version:
                    x, y = buf.column(0), buf.column(1)
                    gaps = gap_after(x, period=period)   # no line across time without samples (engine/figures/gaps.py)
                    name = self._color_name(device)
                    color = palette.device_color(name, self._run_position(name))
                    if spec.smoothed:
                        self._draw_smoothed(plot, device, label, x, y * spec.scale, gaps, color)
                    else:
                        plot.set_series(device, x, y * spec.scale, color, label, gaps=gaps)
                    self._drawn[key] = buf.version
                    updated += 1
        return updated

    @staticmethod
    def _remove(plot: SeriesPlot, device: str) -> None:
        for series in (prefix + device for prefix in PREFIXES):
            if plot.has_series(series):
                plot.remove_series(series)

    def _run_position(self, name: str) -> int:
        """A device's place among the current run's (the colour of a name without its own number)."""
        devices = list(self.telemetry.physical)
        return devices.index(name) if name in devices else 0

    def _color_name(self, key: str) -> str:
        """The device whose colour a live series takes (engine/figures/palette.py device_color): the run's
        device for a core it runs on ("core 2" of "cpu:0"), as the run's stored plots and exports draw it."""
        telemetry = self.telemetry
        if key in telemetry.run_names:
            return next((d for d, physical in telemetry.physical.items() if physical == key), key)
        return key

    def _draw_smoothed(self, plot: SeriesPlot, device: str, label: str, x, y, gaps, color: str) -> None:
        """The raw samples faint, their one-second trailing mean (engine.telemetry.smooth) over them:
        a core's 10 ms ticks make the raw utilization swing 0-100 % at 10 Hz."""
        plot.set_series(RAW_PREFIX + device, x, y, color, name=f"{label} raw", width=1.0, faint=True, gaps=gaps)
        means = self._means.setdefault(device, TrailingMeans()).of(x, y)
        plot.set_series(device, x, means, color, label, gaps=gaps)
        self._draw_core_total(plot, device, label, x, means, color)
        self._draw_sm_activity(plot, device, label, color)

    def _draw_sm_activity(self, plot: SeriesPlot, device: str, label: str, color: str) -> None:
        """A GPU's SM activity (NVML's GPM, Hopper and later) dotted beside its utilization, on the same axis:
        "utilization" is the time any kernel ran, so 100 % of it at 20 % SM activity is a GPU mostly unused."""
        buf = self.telemetry.sm.get(device)
        if buf is None or not len(buf):
            return
        sm_x, sm_y = buf.column(0), buf.column(1)
        plot.set_series(SM_PREFIX + device, sm_x, sm_y, color, gaps=gap_after(sm_x),
                        name=f"{label} SM activity", dash=1, width=1.2)

    def _draw_core_total(self, plot: SeriesPlot, device: str, label: str, x, own_means, color: str) -> None:
        """A run's CPU device reads its own threads' work; its core's total (other programs and steal time
        too) is drawn dashed beside it once they come apart (engine/telemetry/smooth.py core_total_apart),
        so a busy machine is seen, not mistaken for the run's work."""
        key = CORE_PREFIX + device
        buf = self.telemetry.core.get(device)
        if buf is None or not len(buf):
            if plot.has_series(key):
                plot.remove_series(key)
            return
        core_x, core_y = buf.column(0), buf.column(1)
        core_means = self._means.setdefault(key, TrailingMeans()).of(core_x, core_y)
        # The newest samples alone are compared: the redraws come faster than CORE_CHECKED of them, and once
        # drawn the series stays for the run.
        newest = slice(-CORE_CHECKED, None)
        if not plot.has_series(key) and not core_total_apart(x[newest].tolist(), own_means[newest].tolist(),
                                                             core_x[newest].tolist(), core_means[newest].tolist()):
            return
        plot.set_series(key, core_x, core_means, color, gaps=gap_after(core_x),
                        name=f"{label} core total (all programs)", dash=2, width=1.0)

