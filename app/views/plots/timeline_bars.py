"""TimelineBars: the plot items a TimelineView (timeline_view.py) draws its rows with: each lane's idle
background, a bar per interval by kind, dashed lines at step starts, and a folded node's busy share over time
as shading.

Its own module because it is the part of the timeline that turns rows into bars: the view lays out the lanes,
labels them, keeps the time axis's range and says what is under the cursor; this draws the rows in those lanes.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from app.views import theme
from engine.figures import palette
from engine.figures.timeline import FOLD_COLUMNS, KIND_HEIGHT, LANE_HEIGHT, busy_columns
from engine.measure.timing import BUSY_KINDS, KINDS  # the kinds a rank times (engine.measure.timing imports no torch)
from engine.traces.lanes import LANE_KINDS  # a run read from profiler traces: kernels by type, idle gaps by cause


class TimelineBars:
    """Bars for busy intervals over an idle background, dashed lines at step starts, folded nodes shaded."""

    def __init__(self, item: pg.PlotItem):
        self._idle = pg.BarGraphItem(x0=[], y0=[], width=[], height=[],
                                     brush=palette.rgba(palette.IDLE, palette.IDLE_ALPHA), pen=None)
        item.addItem(self._idle)
        self.by_kind: dict[str, pg.BarGraphItem] = {}
        for kind in dict.fromkeys((*KINDS, *LANE_KINDS)):
            bar = pg.BarGraphItem(x0=[], y0=[], width=[], height=[], brush=palette.kind_color(kind), pen=None)
            item.addItem(bar)
            self.by_kind[kind] = bar
        self._steps_line = pg.PlotCurveItem(pen=pg.mkPen(theme.MUTED, width=1, style=QtCore.Qt.PenStyle.DashLine),
                                            connect="pairs")
        item.addItem(self._steps_line)
        # A node folded into one lane: its devices' busy share over time as shading (FOLD_COLUMNS columns).
        self._node_shades = pg.BarGraphItem(x0=[], y0=[], width=[], height=[], brushes=[], pen=None)
        item.addItem(self._node_shades)
        self.node_busy: dict[str, np.ndarray] = {}   # a folded node's busy share per column, as shaded
        self.shade_width = 1.0

    def clear(self) -> None:
        empty = dict(x0=[], y0=[], width=[], height=[])
        self._idle.setOpts(**empty)
        for bar in self.by_kind.values():
            bar.setOpts(**empty)
        self._node_shades.setOpts(**empty, brushes=[])
        self._steps_line.setData([], [])

    def draw(self, rows: list, lanes: list[tuple[str, list[str]]], devices: list[str]) -> tuple[float, float]:
        """Draw ``rows`` (step, device, kind, t0, t1; at least one) in ``lanes`` (TimelineView.lanes) from the
        first interval's start. Returns (that start, the last interval's end from it)."""
        lane_of = {name: lane for lane, (_key, names) in enumerate(lanes) for name in names}
        own = {key for key, names in lanes if key in names}   # devices in lanes of their own
        t0 = np.fromiter((r[3] for r in rows), float, len(rows))
        t1 = np.fromiter((r[4] for r in rows), float, len(rows))
        lane = np.fromiter((lane_of.get(r[1], -1) for r in rows), np.int64, len(rows))
        shown = np.fromiter((r[1] in own for r in rows), bool, len(rows))
        kinds = np.array([r[2] for r in rows])
        origin = float(t0.min())
        t0, t1 = t0 - origin, t1 - origin
        end = float(t1.max())
        n = len(lanes)
        self._idle.setOpts(x0=np.zeros(n), y0=np.arange(n) - LANE_HEIGHT / 2, width=np.full(n, end),
                           height=np.full(n, LANE_HEIGHT))
        self._shade_nodes(lanes, devices, end, t0, t1, kinds, rows, shown)
        for kind, bar in self.by_kind.items():
            sel = shown & (kinds == kind)
            h = KIND_HEIGHT.get(kind, LANE_HEIGHT)
            bar.setOpts(x0=t0[sel], y0=lane[sel] - h / 2, width=np.maximum(t1[sel] - t0[sel], 0.0),
                        height=np.full(int(sel.sum()), h))
        steps = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        step_ids, which = np.unique(steps, return_inverse=True)
        starts = np.full(len(step_ids), np.inf)
        np.minimum.at(starts, which, t0)
        xs = np.repeat(np.sort(starts), 2)
        ys = np.tile([-0.5, n - 0.5], len(starts))
        self._steps_line.setData(xs, ys)
        return origin, end

    def _shade_nodes(self, lanes: list[tuple[str, list[str]]], devices: list[str], end: float, t0: np.ndarray,
                     t1: np.ndarray, kinds: np.ndarray, rows: list, shown: np.ndarray) -> None:
        """Each folded node's lane: per column of time, the share of its devices busy then (darker: more;
        engine/figures/timeline.py busy_columns). ``t0``, ``t1``, ``kinds``: the rows' as arrays, from 0."""
        x0, y0, brushes = [], [], []
        width = self.shade_width = end / FOLD_COLUMNS if end > 0 else 1.0
        self.node_busy = {}
        folded = [(lane, key, names) for lane, (key, names) in enumerate(lanes) if key not in names]
        if folded:
            number = {name: k for k, name in enumerate(devices)}
            device = np.fromiter((number.get(r[1], -1) for r in rows), np.int64, len(rows))
            busy = ~shown & np.isin(kinds, BUSY_KINDS)
        for lane, key, names in folded:
            mine = busy & np.isin(device, [number[name] for name in names])
            shares = busy_columns(t0[mine], t1[mine], device[mine], width, FOLD_COLUMNS) / (len(names) * width)
            shares = self.node_busy[key] = np.clip(shares, 0.0, 1.0)
            columns = np.flatnonzero(shares > 0)
            x0.append(columns * width)
            y0.append(np.full(len(columns), lane - LANE_HEIGHT / 2))
            brushes += [_shade(share) for share in shares[columns].tolist()]
        x0 = np.concatenate(x0) if x0 else np.zeros(0)
        self._node_shades.setOpts(x0=x0, y0=np.concatenate(y0) if y0 else np.zeros(0),
                                  width=np.full(len(x0), width), height=np.full(len(x0), LANE_HEIGHT),
                                  brushes=brushes)


_SHADES: list = []


def _shade(share: float):
    """A folded node's brush for a busy share: ten steps of opacity, made once (a brush a bar was most
    of the lane's cost)."""
    if not _SHADES:
        _SHADES.extend(pg.mkBrush(palette.rgba(palette.FOLDED_BUSY, 0.15 + 0.85 * level / 10)) for level in range(11))
    return _SHADES[int(round(10 * share))]
