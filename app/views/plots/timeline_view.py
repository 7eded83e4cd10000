"""TimelineView: what each device did during the last steps (data, forward, backward, transfer, idle).

The cursor names the interval under it (hover.py): device, kind, step,
which of the step's intervals of that kind it is, for a pipeline's compute the
stage and micro-batch its schedule's plan says it ran (engine.figures.schedule_plan), and
how long it took; between intervals, how long the device idled. The bars themselves are drawn by
TimelineBars (timeline_bars.py).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.views import theme
from app.views.plots import export as plot_export
from app.views.plots.hover import Found, Hover
from app.views.plots.series_plot import cache_axes
from app.views.plots.timeline_bars import TimelineBars
from engine.devices import node_groups, node_of
from engine.figures import Figure, palette, timeline_figure
from engine.figures.heatmap import uses_heatmap
from engine.figures.schedule_plan import action_label, measured_actions
from engine.figures.timeline import FOLD_COLUMNS, LANE_HEIGHT, TIMELINE

# The time axis keeps its range while the steps shown span 60-100 % of it (see _draw).
X_RANGE_HEADROOM = 1.12
X_RANGE_SHRINK = 0.6
LABEL_PX = 13          # px a lane's label needs
SMALL_LABEL_PX = 10    # px a lane's label needs in the smaller font taken where lanes are shorter than LABEL_PX
SMALL_LABEL_PT = 7     # that font's size (eight folded nodes in a 1280x800 window: every node named)


class TimelineView(pg.PlotWidget):
    """One row per device; bars for busy intervals over an idle background; dashed lines at step starts.

    Intervals come as the protocol's step event carries them:
    ``{device: [[kind, t0, t1], ...]}`` with t0/t1 in seconds since the run started.
    """

    sigExported = QtCore.Signal(str)
    sigExportFailed = QtCore.Signal(str)
    sigDeviceClicked = QtCore.Signal(str)   # a device's lane clicked ("" when the click let it go)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent=parent, background=theme.PANEL)
        self.export_name = "timeline"
        self.export_dir = ""
        item = self.getPlotItem()
        self.short_title = False
        self._title_busy("the last step")
        item.setLabel("bottom", TIMELINE.x.label, units=TIMELINE.x.unit, color=theme.MUTED)
        item.showGrid(x=True, y=False, alpha=theme.GRID_ALPHA)
        item.hideButtons()
        item.setMouseEnabled(x=True, y=False)
        item.getViewBox().invertY(True)
        theme.mute_axes(item)
        self.bars = TimelineBars(item)   # the rows drawn, the folded nodes shaded
        # A run over several machines: each node's lanes on a band of its own, every other one shaded.
        self._node_bands: list[pg.LinearRegionItem] = []
        self.collapsed: set[str] = set()
        self.lanes: list[tuple[str, list[str]]] = []   # (its label's key: a device or a node, the devices in it)
        self.highlighted: str | None = None
        self.labels: list[str] = []   # each lane's label, top down (the axis shows those that fit)
        self._highlight = pg.LinearRegionItem((0, 0), orientation="horizontal", movable=False,
                                              brush=palette.rgba(theme.FOREGROUND, 0.12), pen=None)
        self._highlight.setZValue(-10)
        self._highlight.setVisible(False)
        item.addItem(self._highlight, ignoreBounds=True)
        self._marks: list[pg.LinearRegionItem] = []   # a hovered finding's devices (mark_devices)
        self.placeholder = pg.TextItem("Run an experiment to see what each device does, step by step",
                                       color=theme.MUTED, anchor=(0.5, 0.5))
        item.addItem(self.placeholder, ignoreBounds=True)
        self.devices: list[str] = []
        self.busy: dict[str, float] = {}
        self._x_max = 0.0
        self.rows: list[tuple[int, str, str, float, float]] = []  # (step, device, kind, t0, t1), shown
        self.origin = 0.0
        self.schedule_plan: tuple[list, list[str]] = ([], [])   # the run's schedule plan and its devices, by rank
        self.export_actions = plot_export.add_export_actions(self)
        menu = item.getViewBox().menu
        menu.addSeparator()
        menu.addAction("Collapse every node to one lane").triggered.connect(lambda: self.collapse_all(True))
        menu.addAction("Expand every node").triggered.connect(lambda: self.collapse_all(False))
        self.hover = Hover(self, self.interval_at, marker=False)
        self.scene().sigMouseClicked.connect(self._clicked)
        item.getViewBox().sigResized.connect(self._label_rows)
        cache_axes(item)
        self.setMinimumHeight(120)

    def set_plan(self, plan: list[list[str]] | None, devices: list[str]) -> None:
        """The schedule's plan of the run shown: the hover names each compute interval's micro-batch by it."""
        self.schedule_plan = (plan or [], list(devices))

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming; see SeriesPlot.sizeHint)
        return QtCore.QSize(600, 260)

    def set_hint(self, text: str) -> None:
        """The line the timeline shows while it has no steps (what a starting run is doing)."""
        self.placeholder.setText(text)

    def hint(self) -> str:
        return self.placeholder.toPlainText()

    def set_devices(self, devices: list[str]) -> None:
        """The run's devices. With many over several nodes, each node starts folded into one lane."""
        if list(devices) != self.devices:
            groups = node_groups(list(devices))
            many = len(groups) > 1 and uses_heatmap(len(devices))
            self.collapsed = {node for node, _ in groups} if many else set()
        self.devices = list(devices)
        self._lay_out()

    def _lay_out(self) -> None:
        """The lanes from the devices and the folded nodes, their labels, bands and the view's height."""
        self.lanes = []
        for node, names in self.node_groups():
            if node is not None and node in self.collapsed:
                self.lanes.append((node, names))
            else:
                self.lanes += [(name, [name]) for name in names]
        self._label_rows()
        self._band_nodes()
        self.getPlotItem().setYRange(-0.5, max(len(self.lanes), 1) - 0.5, padding=0.05)
        self.highlight(self.highlighted if self.highlighted in self.devices else None)   # its lane may have moved
        self._draw()

    def collapse(self, node: str, collapsed: bool = True) -> None:
        """Fold ``node``'s devices into one lane (or unfold them)."""
        if collapsed:
            self.collapsed.add(node)
        else:
            self.collapsed.discard(node)
        self._lay_out()

    def collapse_all(self, collapsed: bool) -> None:
        self.collapsed = {node for node, _ in self.node_groups() if node is not None} if collapsed else set()
        self._lay_out()

    def lane_of(self, device: str) -> int | None:
        """The lane ``device`` is drawn in (its own, or its folded node's)."""
        return next((i for i, (_, names) in enumerate(self.lanes) if device in names), None)

    def highlight(self, device: str | None) -> None:
        """A band across ``device``'s lane (None: none)."""
        self.highlighted = device
        lane = self.lane_of(device) if device else None
        self._highlight.setVisible(lane is not None)
        if lane is not None:
            self._highlight.setRegion((lane - 0.5, lane + 0.5))

    def mark_devices(self, devices: list[str]) -> None:
        """A band across each lane holding one of ``devices`` (a finding's, while the cursor is on it), beside the
        picked device's; [] takes them away."""
        item = self.getPlotItem()
        for band in self._marks:
            item.removeItem(band)
        lanes = sorted({lane for lane in (self.lane_of(d) for d in devices) if lane is not None})
        self._marks = [pg.LinearRegionItem((lane - 0.5, lane + 0.5), orientation="horizontal", movable=False,
                                           brush=palette.rgba(theme.WARNING, 0.18), pen=None) for lane in lanes]
        for band in self._marks:
            band.setZValue(-9)
            item.addItem(band, ignoreBounds=True)

    def _clicked(self, event) -> None:
        """A click on a folded node unfolds it; on a device's lane, picks the device (again: lets it go)."""
        if event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        view = self.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(event.scenePos()):
            return
        lane = int(round(view.mapSceneToView(event.scenePos()).y()))
        if not 0 <= lane < len(self.lanes):
            return
        key, names = self.lanes[lane]
        if key not in names:
            self.collapse(key, False)
            return
        device = None if key == self.highlighted else key
        self.highlight(device)
        self.sigDeviceClicked.emit(device or "")

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
        for k, (node, names) in enumerate(groups):
            lanes = 1 if node in self.collapsed else len(names)
            if k % 2:
                band = pg.LinearRegionItem((first - 0.5, first + lanes - 0.5), orientation="horizontal",
                                           movable=False, brush=palette.rgba(theme.FOREGROUND, 0.06))
                for edge in band.lines:  # a hairline between nodes, not the draggable edges' highlight
                    edge.setPen(pg.mkPen(palette.rgba(theme.MUTED, 0.5), width=1))
                band.setZValue(-20)
                item.addItem(band, ignoreBounds=True)
                self._node_bands.append(band)
            first += lanes

    def _title_busy(self, covers: str) -> None:
        self.busy_covers = covers
        if self.short_title:
            self.getPlotItem().titleLabel.setText("")   # hidden, its text would still ask for its width
            self.getPlotItem().setTitle(None)
            return
        self.getPlotItem().setTitle(
            f"<span style='color:{theme.FOREGROUND};font-size:10pt'>{TIMELINE.title}</span>"
            f"<span style='color:{theme.MUTED};font-size:9pt'> · busy share of {covers} at left</span>")

    def set_short_title(self, short: bool) -> None:
        """No title, and the time axis named short: a timeline beside another run's is narrow (its run's name is
        above it), and words wider than the plot widened its scene past the view (the right of the steps was lost)."""
        self.short_title = short
        self._title_busy(self.busy_covers)
        self.getPlotItem().setLabel("bottom", "time" if short else TIMELINE.x.label, units=TIMELINE.x.unit,
                                    color=theme.MUTED)

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
        labels = [self._lane_label(key, names) for key, names in self.lanes]
        # Lanes go node by node (a run over several machines): the node's name heads its first lane only.
        for k in range(1, len(labels)):
            key, previous = self.lanes[k][0], self.lanes[k - 1][0]
            node = node_of(key)
            if node is not None and node == node_of(previous):
                labels[k] = labels[k][len(node) + 1:]
        axis = self.getPlotItem().getAxis("left")
        self.labels = labels
        # Lanes shorter than a line of text: a smaller font, then every k-th named.
        pixels = self.getPlotItem().getViewBox().height() or 200.0
        small = LABEL_PX * len(labels) > pixels
        if small != getattr(self, "_small_labels", False):   # a style change redraws the axis: only on a change
            self._small_labels = small
            font = QtGui.QFont(self.font())
            if small:
                font.setPointSize(SMALL_LABEL_PT)
            axis.setStyle(tickFont=font)
        every = max(1, math.ceil((SMALL_LABEL_PX if small else LABEL_PX) * len(labels) / pixels))
        axis.setTicks([list(enumerate(labels))[::every], []])
        # Tick labels do not widen the axis by themselves; size it for the longest label
        # (room for "100%" always, so the axis keeps its width as the shares change).
        width = max([len(name) + (6 if self.busy else 0) for name in self.devices] + [4])
        axis.setWidth(int(12 + (5 if small else 7) * width))

    def _lane_label(self, key: str, names: list[str]) -> str:
        """"cpu:0  71%", or a folded node's "node3 ▸ 8  64%" (its devices' mean busy share)."""
        if key in names:
            return f"{key}  {100 * self.busy[key]:.0f}%" if key in self.busy else key
        shares = [self.busy[name] for name in names if name in self.busy]
        share = f"  {100 * sum(shares) / len(shares):.0f}%" if shares else ""
        return f"{key} ▸ {len(names)}{share}"

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
        else:
            self._draw()

    def _draw(self) -> None:
        self.placeholder.setVisible(not self.rows)
        if not self.rows:
            self.placeholder.setPos(0.5, (max(len(self.lanes), 1) - 1) / 2)
            self.getPlotItem().setXRange(0, 1, padding=0)
            self.bars.clear()
            return
        self.origin, end = self.bars.draw(self.rows, self.lanes, self.devices)
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
        interval shown, y a lane (the devices top down; a folded node's share of devices busy then)."""
        lane = int(round(y))
        if not self.rows or not 0 <= lane < len(self.lanes) or abs(y - lane) > LANE_HEIGHT / 2:
            return None
        key, names = self.lanes[lane]
        if key not in names:
            shares = self.bars.node_busy.get(key, np.zeros(FOLD_COLUMNS))
            column = min(max(int(x // self.bars.shade_width), 0), FOLD_COLUMNS - 1)
            return Found(f"{key} · {len(names)} devices\n{100 * shares[column]:.0f} % of them busy at "
                         f"{_duration(x)}\nclick to show each device", x, float(lane))
        device, t = key, x + self.origin
        mine = [r for r in self.rows if r[1] == device]
        under = [r for r in mine if r[3] <= t <= r[4]]
        if under:
            step, _, kind, t0, t1 = min(under, key=lambda r: r[4] - r[3])  # a wait under its neighbour's end
            same = [r for r in mine if r[0] == step and r[2] == kind]
            which = f", {kind} {same.index((step, device, kind, t0, t1)) + 1} of {len(same)}" if len(same) > 1 else ""
            action = measured_actions(*self.schedule_plan,
                                      [r for r in mine if r[0] == step]).get((step, device, kind, t0, t1))
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
        plan, devices = self.schedule_plan
        return timeline_figure(self.rows, devices or self.devices, last=len({row[0] for row in self.rows}) or 1,
                               plan=plan or None)

    def export(self, fmt: str, path: str | Path) -> Path | None:
        return plot_export.export_widget(self, fmt, path)


def _duration(seconds: float) -> str:
    """"3.21 ms", "1.5 s": three digits, in the unit the timeline's axis shows at that size."""
    return f"{seconds * 1000:.3g} ms" if abs(seconds) < 1 else f"{seconds:.3g} s"
