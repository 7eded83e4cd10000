"""The live heatmap's columns, kept up to date as samples come (no Qt).

A live heatmap (app/views/plots/heatmap_plot.py) shows each device's samples as the means of
time columns about a pixel wide (engine/figures/heatmap.py). Recomputing an hour of
samples for 64 devices each redraw is 2.3 million samples; a column's mean depends only
on the samples inside it, so the columns' sums and counts are kept, a row per device, and
only the samples that arrived since the last redraw are added: all devices' at once, in
one numpy call (a call per device was most of a redraw with 256). The columns are fixed in
time (their width one of 1, 2, 2.5, 5 x 10^k s), so a scrolling window reuses them; a zoom
that changes the width starts them again, once.
"""
from __future__ import annotations

import math

import numpy as np

from app.state.ring_buffer import RingBuffer
from engine.figures.heatmap import nice_width

GROW = 1024   # columns added at a time


class HeatColumns:
    """Sums and counts per device (row) and time column k (x in [k dx, (k+1) dx)), at the width last asked."""

    def __init__(self):
        self.dx: float | None = None
        self.since = math.inf                # where the rows began (a window reaching before it begins them again)
        self.rows: dict[str, int] = {}       # device -> its row
        self.first = 0                       # the column of sums[:, 0]
        self.sums = np.zeros((0, 0))
        self.counts = np.zeros((0, 0))
        self.last_x = np.zeros(0)            # per row: the newest sample taken in
        self._taken: dict[str, tuple[int, int]] = {}   # each device's buffer (its id) and version last taken in
        self._lengths: dict[str, int] = {}             # and how many samples it held then

    def matrix(self, buffers: dict[str, RingBuffer], devices: list[str], start: float, end: float,
               pixels: int, sample_period: float) -> tuple[np.ndarray, float, float]:
        """(rows of column means for ``devices``, the first column's start, the column width) covering
        ``start`` .. ``end``: columns at least a pixel and two sampling periods wide (one sample a column
        would leave holes wherever a sample came late)."""
        dx = nice_width(max((end - start) / max(pixels, 1), 2 * sample_period))
        first = math.floor(start / dx)
        if dx != self.dx or first * dx < self.since:   # a zoom: the columns begin afresh, from this window on
            self.__init__()
            self.dx, self.since = dx, first * dx
        self._take(buffers, devices, self.since)
        columns = math.floor(end / dx) - first + 1
        out = np.full((len(devices), columns), np.nan)
        lo, hi = max(first, self.first), min(first + columns, self.first + self.sums.shape[1])
        if hi > lo and self.rows:
            rows = np.array([self.rows.get(d, -1) for d in devices])
            known = rows >= 0
            sums = self.sums[rows[known], lo - self.first:hi - self.first]
            counts = self.counts[rows[known], lo - self.first:hi - self.first]
            with np.errstate(invalid="ignore", divide="ignore"):
                out[known, lo - first:hi - first] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        return out, first * dx, dx

    def _take(self, buffers: dict[str, RingBuffer], devices: list[str], start: float) -> None:
        """Add the samples that came since the last call, every device's in one go; a row begun afresh from
        ``start`` on (the window only moves on; a wider one is another column width, begun afresh: a zoom
        adds up the window's samples, not the buffer's hour)."""
        xs, ys, rows = [], [], []
        oldest = math.inf
        for device in devices:
            buf = buffers.get(device)
            if buf is None or not len(buf):
                continue
            seen = self._taken.get(device)
            if seen == (id(buf), buf.version):
                continue
            self._taken[device] = (id(buf), buf.version)
            x, y = buf.column(0), buf.column(1)
            oldest = min(oldest, float(x[0]))
            row = self._row(device)
            # Another buffer, or this one cleared or gone back in time: the row starts again.
            if (seen is None or seen[0] != id(buf) or x[-1] < self.last_x[row]
                    or len(x) < self._lengths.get(device, 0)):
                self.sums[row] = self.counts[row] = 0.0
                self.last_x[row] = -math.inf
            self._lengths[device] = len(x)
            new = int(np.searchsorted(x, self.last_x[row], side="right")) if self.last_x[row] > -math.inf \
                else int(np.searchsorted(x, start, side="left"))
            if new < len(x):
                xs.append(x[new:])
                ys.append(y[new:])
                rows.append(np.full(len(x) - new, row))
                self.last_x[row] = float(x[-1])
        if not xs:
            return
        x, y, row = np.concatenate(xs), np.concatenate(ys), np.concatenate(rows)
        column = np.floor(x / self.dx).astype(np.int64)
        self._cover(int(column.min()), int(column.max()), oldest)
        flat = row * self.sums.shape[1] + (column - self.first)
        size = self.sums.size
        if len(flat) > size // 16:   # an hour at once: one pass over the whole table
            self.sums += np.bincount(flat, weights=y, minlength=size).reshape(self.sums.shape)
            self.counts += np.bincount(flat, minlength=size).reshape(self.counts.shape)
        else:                        # a redraw's few new samples
            np.add.at(self.sums.ravel(), flat, y)
            np.add.at(self.counts.ravel(), flat, 1)

    def _row(self, device: str) -> int:
        if device not in self.rows:
            self.rows[device] = len(self.rows)
            width = self.sums.shape[1]
            self.sums = np.vstack((self.sums, np.zeros((1, width))))
            self.counts = np.vstack((self.counts, np.zeros((1, width))))
            self.last_x = np.append(self.last_x, -math.inf)
        return self.rows[device]

    def _cover(self, low: int, high: int, oldest: float) -> None:
        """Columns from ``low`` to ``high`` held; those before the buffers' oldest sample let go."""
        width = self.sums.shape[1]
        if not width:
            self.first = low
        if low < self.first:   # a device whose samples start before the others'
            pad = np.zeros((len(self.rows), self.first - low))
            self.sums, self.counts = np.hstack((pad, self.sums)), np.hstack((pad.copy(), self.counts))
            self.first, width = low, self.sums.shape[1]
        if high - self.first + 1 > width:
            pad = np.zeros((len(self.rows), high - self.first + 1 - width + GROW))
            self.sums, self.counts = np.hstack((self.sums, pad)), np.hstack((self.counts, pad.copy()))
        cut = math.floor(oldest / self.dx) - self.first
        if cut > GROW:
            self.sums, self.counts = self.sums[:, cut:].copy(), self.counts[:, cut:].copy()
            self.first += cut
