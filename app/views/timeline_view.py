"""TimelineView: what each device did during the last steps (data, forward, backward, transfer, idle).

The cursor names the interval under it (plot_hover.py): device, kind, step,
which of the step's intervals of that kind it is, for a pipeline's compute the
stage and micro-batch its schedule's plan says it ran (engine.figures.plan), and
how long it took; between intervals, how long the device idled.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.views import plot_export, theme
from app.views.plot_hover import Found, Hover
from app.views.series_plot import cache_axes
from engine.devices import node_groups, node_of
from engine.figures import Figure, palette, timeline_figure
from engine.figures.plan import action_label, measured_actions
from engine.figures.timeline import KIND_HEIGHT, LANE_HEIGHT, TIMELINE
from engine.measure.timing import KINDS  # the kinds a rank times (engine.measure.timing imports no torch)
# The time axis keeps its range while the steps shown span 60-100 % of it (see _draw).
X_RANGE_HEADROOM = 1.12
X_RANGE_SHRINK = 0.6


class TimelineView(pg.PlotWidget):
    """One row per device; bars for busy intervals over an idle background; dashed lines at step starts.

    Intervals come as the protocol's step event carries them:
    ``{device: [[kind, t0, t1], ...]}`` with t0/t1 in seconds since the run started.
    """

    sigExported = QtCore.Signal(str)
    sigExportFailed = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent=parent, background=theme.PANEL)
        self.export_name = "timeline"
        self.export_dir = ""
        item = self.getPlotItem()
        self._title_busy("the last step")
        item.setLabel("bottom", TIMELINE.x.label, units=TIMELINE.x.unit, color=theme.MUTED)
        item.showGrid(x=True, y=False, alpha=theme.GRID_ALPHA)
        item.hideButtons()
        item.setMouseEnabled(x=True, y=False)
        item.getViewBox().invertY(True)
        theme.mute_axes(item)
        self._idle = pg.BarGraphItem(x0=[], y0=[], width=[], height=[],
                                     brush=palette.rgba(palette.IDLE, palette.IDLE_ALPHA), pen=None)
        item.addItem(self._idle)
        self._bars: dict[str, pg.BarGraphItem] = {}
        for kind in KINDS:
            bar = pg.BarGraphItem(x0=[], y0=[], width=[], height=[], brush=palette.kind_color(kind), pen=None)
            item.addItem(bar)
            self._bars[kind] = bar
        self._steps_line = pg.PlotCurveItem(pen=pg.mkPen(theme.MUTED, width=1, style=QtCore.Qt.PenStyle.DashLine),
                                            connect="pairs")
        item.addItem(self._steps_line)
        # A run over several machines: each node's lanes on a band of its own, every other one shaded.
        self._node_bands: list[pg.LinearRegionItem] = []
        self.placeholder = pg.TextItem("Run an experiment to see what each device does, step by step",
                                       color=theme.MUTED, anchor=(0.5, 0.5))
        item.addItem(self.placeholder, ignoreBounds=True)
        self.devices: list[str] = []
        self.busy: dict[str, float] = {}
        self._x_max = 0.0
        self.rows: list[tuple[int, str, str, float, float]] = []  # (step, device, kind, t0, t1), shown
        self.origin = 0.0
        self.plan: tuple[list, list[str]] = ([], [])   # the run's schedule plan and its devices, by rank
        self.export_actions = plot_export.add_export_actions(self)
        self.hover = Hover(self, self.interval_at, marker=False)
        cache_axes(item)
        self.setMinimumHeight(120)

    def set_plan(self, plan: list[list[str]] | None, devices: list[str]) -> None:
        """The schedule's plan of the run shown: the hover names each compute interval's micro-batch by it."""
        self.plan = (plan or [], list(devices))

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming; see SeriesPlot.sizeHint)
        return QtCore.QSize(600, 260)

    def set_hint(self, text: str) -> None:
        """The line the timeline shows while it has no steps (what a starting run is doing)."""
        self.placeholder.setText(text)

    def hint(self) -> str:
        return self.placeholder.toPlainText()

    def set_devices(self, devices: list[str]) -> None:
        self.devices = list(devices)
        self._label_rows()
        self._band_nodes()
        self.getPlotItem().setYRange(-0.5, max(len(self.devices), 1) - 0.5, padding=0.05)

    def node_groups(self) -> list[tuple[str | None, list[str]]]:
        """The lanes by node (engine.devices.node_groups): one group, None, for a run on this machine."""
        return node_groups(self.devices)

    def _band_nodes(self) -> None:
        item = self.getPlotItem()
        for band in self._node_bands:
            item.removeItem(band)
        self._node_bands = []
        groups = self.node_groups()
        if len(groups) < 2:
            return
        first = 0
        for k, (_node, names) in enumerate(groups):
            if k % 2:
                band = pg.LinearRegionItem((first - 0.5, first + len(names) - 0.5), orientation="horizontal",
                                           movable=False, brush=palette.rgba(theme.FOREGROUND, 0.06))
                for edge in band.lines:  # a hairline between nodes, not the draggable edges' highlight
                    edge.setPen(pg.mkPen(palette.rgba(theme.MUTED, 0.5), width=1))
                band.setZValue(-20)
                item.addItem(band, ignoreBounds=True)
                self._node_bands.append(band)
            first += len(names)

    def _title_busy(self, covers: str) -> None:
        self.busy_covers = covers
        self.getPlotItem().setTitle(
            f"<span style='color:{theme.FOREGROUND};font-size:10pt'>{TIMELINE.title}</span>"
            f"<span style='color:{theme.MUTED};font-size:9pt'> · busy share of {covers} per device at left</span>")

    def set_busy(self, busy: dict[str, float], covers: str = "the last step") -> None:
        """Each device's busy share (0..1) of the steps ``covers`` names, shown in its row's label."""
        if covers != self.busy_covers:
            self._title_busy(covers)
        busy = {str(d): float(v) for d, v in (busy or {}).items()}
        if busy != self.busy:
            self.busy = busy
            self._label_rows()

    def _label_rows(self) -> None:
        # The share sits beside the bars it sums up ("cpu:0  71%"), one line a row: the
        # bubble box beside stays the same height for 2 devices or 8.
        labels = [f"{name}  {100 * self.busy[name]:.0f}%" if name in self.busy else name for name in self.devices]
        # Lanes go node by node (a run over several machines): the node's name heads its first lane only.
        for k in range(1, len(labels)):
            node = node_of(self.devices[k])
            if node is not None and node == node_of(self.devices[k - 1]):
                labels[k] = labels[k][len(node) + 1:]
        axis = self.getPlotItem().getAxis("left")
        axis.setTicks([list(enumerate(labels)), []])
        # Tick labels do not widen the axis by themselves; size it for the longest label
        # (room for "100%" always, so the axis keeps its width as the shares change).
        width = max([len(name) + (6 if self.busy else 0) for name in self.devices] + [4])
        axis.setWidth(int(12 + 7 * width))

    def clear_steps(self) -> None:
        # Not "clear": PlotWidget binds plotItem.clear (which removes every item) over that name.
        self.rows = []
        self._x_max = 0.0
        self.set_busy({})
        self._draw()

    def set_steps(self, steps: Iterable[tuple[int, dict]]) -> None:
        """Show these steps: (step number, {device: [[kind, t0, t1], ...]}), oldest first."""
        rows = []
        for step, intervals in steps:
            for device, spans in (intervals or {}).items():
                for kind, t0, t1 in spans:
                    rows.append((int(step), str(device), str(kind), float(t0), float(t1)))
        self.set_rows(rows)

    def set_rows(self, rows: list[tuple[int, str, str, float, float]]) -> None:
        self.rows = sorted(rows, key=lambda r: r[3])
        known = set(self.devices)
        extra = [r[1] for r in self.rows if r[1] not in known]
        if extra:
            self.set_devices(self.devices + list(dict.fromkeys(extra)))
        self._draw()

    def _draw(self) -> None:
        self.placeholder.setVisible(not self.rows)
        if not self.rows:
            self.placeholder.setPos(0.5, (max(len(self.devices), 1) - 1) / 2)
            self.getPlotItem().setXRange(0, 1, padding=0)
            empty = dict(x0=[], y0=[], width=[], height=[])
            self._idle.setOpts(**empty)
            for bar in self._bars.values():
                bar.setOpts(**empty)
            self._steps_line.setData([], [])
            return
        index = {name: i for i, name in enumerate(self.devices)}
        self.origin = min(r[3] for r in self.rows)
        end = max(r[4] for r in self.rows) - self.origin
        n = len(self.devices)
        self._idle.setOpts(x0=np.zeros(n), y0=np.arange(n) - LANE_HEIGHT / 2, width=np.full(n, end),
                           height=np.full(n, LANE_HEIGHT))
        for kind, bar in self._bars.items():
            sel = [r for r in self.rows if r[2] == kind]
            h = KIND_HEIGHT.get(kind, LANE_HEIGHT)
            bar.setOpts(x0=np.array([r[3] - self.origin for r in sel]),
                        y0=np.array([index[r[1]] - h / 2 for r in sel]),
                        width=np.array([max(r[4] - r[3], 0.0) for r in sel]),
                        height=np.full(len(sel), h))
        starts = {}
        for step, _dev, _kind, t0, _t1 in self.rows:
            starts[step] = min(starts.get(step, t0), t0)
        xs = np.repeat(np.array(sorted(starts.values())) - self.origin, 2)
        ys = np.tile([-0.5, n - 0.5], len(starts))
        self._steps_line.setData(xs, ys)
        # The range moves only when the steps outgrow it or shrink well inside it: a range
        # that followed every step's length redrew the time axis, text and grid, each step.
        if not (X_RANGE_SHRINK * self._x_max <= end <= self._x_max):
            self._x_max = end * X_RANGE_HEADROOM
        view = self.getPlotItem().getViewBox()
        view.setXRange(0, self._x_max, padding=0.02)
        # Move the items to the new range now: left to the paint, they would move during
        # the paint and the view would paint twice.
        view.updateMatrix()

    # -- hover -----------------------------------------------------------------
    def interval_at(self, x: float, y: float) -> Found | None:
        """The interval (or the idle time) at view position (x, y): x in seconds since the first
        interval shown, y a lane (the devices top down)."""
        lane = int(round(y))
        if not self.rows or not 0 <= lane < len(self.devices) or abs(y - lane) > LANE_HEIGHT / 2:
            return None
        device, t = self.devices[lane], x + self.origin
        mine = [r for r in self.rows if r[1] == device]
        under = [r for r in mine if r[3] <= t <= r[4]]
        if under:
            step, _, kind, t0, t1 = min(under, key=lambda r: r[4] - r[3])  # a wait under its neighbour's end
            same = [r for r in mine if r[0] == step and r[2] == kind]
            which = f", {kind} {same.index((step, device, kind, t0, t1)) + 1} of {len(same)}" if len(same) > 1 else ""
            action = measured_actions(*self.plan, [r for r in mine if r[0] == step]).get((step, device, kind, t0, t1))
            if action is not None:
                which += f"\nstage {action[0]}, micro-batch {action[1]} ({action_label(kind, *action)} in the plan)"
            text = f"{device} · {kind}\nstep {step}{which}\n{_duration(t1 - t0)} from {_duration(t0 - self.origin)}"
            return Found(text, (t0 + t1) / 2 - self.origin, float(lane))
        before = max((r[4] for r in mine if r[4] < t), default=None)
        after = min((r[3] for r in mine if r[3] > t), default=None)
        if before is None or after is None:
            return None
        step = next(r[0] for r in mine if r[4] == before)
        text = f"{device} · idle\nstep {step}\n{_duration(after - before)}"
        return Found(text, (before + after) / 2 - self.origin, float(lane))

    # -- export ----------------------------------------------------------------
    def to_figure(self) -> Figure:
        """The steps shown, as the exports' timeline figure (engine.figures.timeline_figure)."""
        plan, devices = self.plan
        return timeline_figure(self.rows, devices or self.devices, last=len({row[0] for row in self.rows}) or 1,
                               plan=plan or None)

    def export(self, fmt: str, path: str | Path) -> Path | None:
        return plot_export.export_widget(self, fmt, path)


def _duration(seconds: float) -> str:
    """"3.21 ms", "1.5 s": three digits, in the unit the timeline's axis shows at that size."""
    return f"{seconds * 1000:.3g} ms" if abs(seconds) < 1 else f"{seconds:.3g} s"
