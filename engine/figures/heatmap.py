"""A device-by-time heatmap: how utilization and memory are drawn once the devices are too many to tell apart.

From ``HEATMAP_FROM`` devices on, a line per device is a tangle (64 lines, 64 legend entries), so the
app's plots and the exports draw a row per device instead, grouped by node (engine.devices.node_groups),
time across in columns of equal width, the colour a column's mean; above it, the mean of each node as a
line (DCGM's dashboards and nvitop's compact mode show the same two views). The arithmetic lives here,
once, for the app's live view (app/state/heat_columns.py keeps it incremental), its history and the exports.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from engine.devices import node_groups
from engine.figures import palette
from engine.figures.figure import Figure, Heat, Series, node_blocks

HEATMAP_FROM = 9         # devices: from this many on, utilization and memory are heatmaps
EXPORT_COLUMNS = 600     # time columns of an exported heatmap (a 1600-pixel PNG's plot is about that wide)
COLORMAP = "viridis"     # perceptually even, readable on the app's dark panels and the exports' white
NICE_STEPS = (1, 2, 2.5, 5, 10)


def uses_heatmap(devices: int) -> bool:
    return devices >= HEATMAP_FROM


def as_matrix(values: Sequence[Sequence]) -> np.ndarray:
    """A heatmap's cells as an array: NaN where a cell has no value (None)."""
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float) \
        if len(values) else np.empty((0, 0))


def as_cells(values) -> list:
    """An array's values as a figure keeps them (lists of floats, None where NaN): a matrix's rows, or a row."""
    array = np.asarray(values, dtype=float)
    cells = array.astype(object)
    cells[~np.isfinite(array)] = None
    return cells.tolist()


def nice_width(at_least: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is ``at_least``: a column width that stays put
    while a live window scrolls (a column is the same time span from one redraw to the next)."""
    if at_least <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(at_least))
    return next(step * scale for step in NICE_STEPS if step * scale >= at_least * (1 - 1e-9))


def round_up(value: float) -> float:
    """``value`` rounded up to two significant digits (62,464 -> 63,000): an open colour scale's top that
    moves seldom and wastes little of the scale."""
    if value <= 0:
        return 1.0
    step = 10.0 ** (math.floor(math.log10(value)) - 1)
    return math.ceil(value / step * (1 - 1e-12)) * step


def column_means(x: np.ndarray, y: np.ndarray, x0: float, dx: float, columns: int) -> np.ndarray:
    """The mean of the samples (x ascending) in each column [x0 + k dx, x0 + (k+1) dx); NaN where none fell."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    index = np.floor((x - x0) / dx).astype(np.int64)
    inside = (index >= 0) & (index < columns)
    sums = np.bincount(index[inside], weights=y[inside], minlength=columns)
    counts = np.bincount(index[inside], minlength=columns)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def block_means(matrix: np.ndarray, blocks: Sequence[tuple[str | None, int, int]]) -> list[np.ndarray]:
    """Each node's mean over its devices, column by column (NaN where none of them had a sample)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # an all-empty column's mean is NaN, as it should be
        return [np.nanmean(matrix[first:first + rows], axis=0) if rows else np.full(matrix.shape[1], np.nan)
                for _, first, rows in blocks]


def mean_name(node: str | None) -> str:
    """How a node's mean line is named: "node3 mean"; "mean of all devices" on one machine."""
    return f"{node} mean" if node is not None else "mean of all devices"


def heat_figure(frame: Figure, series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                columns: int = EXPORT_COLUMNS, title: str | None = None,
                table: tuple[list[str], list[list]] | None = None) -> Figure:
    """``frame`` (utilization, memory) as a heatmap of ``series`` ({device: (x, y)}, in row order) with each
    node's mean above it. The colour scale is the frame's y range, its open end the data's highest value.
    ``table``: the CSV's (columns, rows), every sample, as the line figure's."""
    devices = [name for _, names in node_groups(list(series)) for name in names]   # each node's rows together
    series = {name: series[name] for name in devices}
    xs = [np.asarray(x, dtype=float) for x, _ in series.values()]
    known = [x for x in xs if len(x)]
    start = min(float(x[0]) for x in known) if known else 0.0
    end = max(float(x[-1]) for x in known) if known else 1.0
    dx = max((end - start) / max(columns, 1), 1e-9) * (1 + 1e-9)   # the last sample falls in the last column
    matrix = np.array([column_means(x, y, start, dx, columns) for x, (_, y) in zip(xs, series.values(), strict=True)]) \
        if devices else np.empty((0, columns))
    low, top = frame.y_range
    low = 0.0 if low is None else float(low)
    finite = matrix[np.isfinite(matrix)]
    top = float(top) if top is not None else (round_up(float(finite.max())) if finite.size else 1.0)
    heat = Heat(devices, start, dx, as_cells(matrix), low, max(top, low + 1e-9))
    return heat_of(frame.with_data(title=title or frame.title), heat, table)


def heat_of(frame: Figure, heat: Heat, table: tuple[list[str], list[list]] | None = None) -> Figure:
    """The figure of ``heat``: its rows, each node's mean as a line (``series``), and its table (``table``,
    or one row per device and column)."""
    matrix = as_matrix(heat.values)
    blocks = node_blocks(heat.devices)
    centers = heat.x0 + heat.dx * (np.arange(heat.columns) + 0.5)
    means = [Series(mean_name(node), centers.tolist(), as_cells(mean),
                    palette.series_color(k))
             for k, ((node, _, _), mean) in enumerate(zip(blocks, block_means(matrix, blocks), strict=True))] \
        if len(matrix) else []
    columns, rows = table if table is not None else heat_table(heat, frame)
    return frame.with_data(series=means, heat=heat, columns=columns, rows=rows)


def heat_table(heat: Heat, frame: Figure) -> tuple[list[str], list[list]]:
    """A heatmap's own table: one row per device and column with a value."""
    rows = [[device, heat.x0 + (k + 0.5) * heat.dx, value]
            for device, row in zip(heat.devices, heat.values, strict=False)
            for k, value in enumerate(row) if value is not None]
    return ["device", frame.x.text, f"mean {frame.y.text}"], rows
