"""What a figure is, whoever draws it: the app (pyqtgraph) or an export (engine/export/drawing.py, matplotlib).

A ``Figure`` says everything either needs and nothing about how: its file name,
title, axes with units, what is drawn (``series`` of lines, ``bars``, a
timeline's ``lanes``, or a device-by-time ``heat``map), the ``marks`` over it, the y range, and the table behind
it (``columns`` with units, ``rows``; the CSV export). Charts may show friendlier
units than the table (ms on the axis, seconds in the table) and say so on the axis.

A figure without data is a frame: the run's frames (engine/figures/run.py) name
the app's live plots too, so a live plot and its export carry one title and unit.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.devices import node_groups
from engine.figures import palette
from engine.figures.numbers import is_number


@dataclass(frozen=True)
class Axis:
    label: str
    unit: str | None = None

    @property
    def text(self) -> str:
        """"utilization (%)": the label with its unit, as both backends print it."""
        return f"{self.label} ({self.unit})" if self.unit else self.label


@dataclass(frozen=True)
class Series:
    """One named curve. ``y`` None (or NaN) where there is no value: both backends break the line there
    (engine/figures/gaps.py puts one across time without samples)."""
    name: str                       # the legend's entry, and the app's key for the curve: unique in a figure
    x: Sequence
    y: Sequence
    color: str
    dash: int = 0                   # index into palette.DASHES
    width: float = 1.6              # points
    faint: bool = False             # raw samples behind their mean: translucent, thin, no legend entry
    yerr: Sequence | None = None    # ± this around each y (a sweep's std over the repeats)
    markers: bool = False           # a dot on each point: a few points that each mean something

    def points(self) -> int:
        """How many points can be drawn (both x and y numbers)."""
        return sum(1 for x, y in zip(self.x, self.y, strict=True) if is_number(x) and is_number(y))


@dataclass(frozen=True)
class Mark:
    """A highlighted x position: a dashed line and its label, and a ring at ``y`` if given."""
    x: float
    label: str
    y: float | None = None
    color: str = palette.BEST


@dataclass(frozen=True)
class Segment:
    """One part of stacked bars: its value on each bar (None or 0: none), drawn in its colour from the top of
    the parts before it."""
    name: str
    values: list
    color: str


@dataclass(frozen=True)
class Bars:
    """One bar per label from zero; None draws no bar (a point that failed, or lacks the value). With
    ``segments`` each bar is their stack, ``values`` the stacks' totals (what is labelled and hovered)."""
    labels: list[str]
    values: list
    errors: list | None = None      # ± std, an error bar on each bar
    refs: list | None = None        # a dashed reference across each bar (the theoretical bubble)
    ref_label: str = ""
    best: int | None = None         # drawn in palette.BEST and labelled "best"
    color: str = palette.series_color(0)
    segments: list[Segment] | None = None


@dataclass(frozen=True)
class Lanes:
    """A timeline: one lane per device, intervals in the x axis' unit since the window's start."""
    devices: list[str]
    intervals: list[tuple[str, str, float, float]]   # (device, kind, start, end)
    end: float                                       # the window's length
    boundaries: list[float] = field(default_factory=list)   # where a step ended and the next began
    # A node folded into one lane (many devices, engine/figures/timeline.py): the share of its devices busy in
    # each of equal columns across ``end``; its devices' intervals stay in the table.
    folded: dict[str, list[float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Heat:
    """A heatmap's data: per device (rows, top down) the mean of each time column (None: no sample)."""
    devices: list[str]
    x0: float                     # where the first column starts (the x axis' unit)
    dx: float                     # a column's width
    values: list[list]            # [device][column]
    low: float                    # the colour scale's ends, in the figure's y unit
    high: float

    @property
    def columns(self) -> int:
        return len(self.values[0]) if self.values else 0

    def groups(self) -> list[tuple[str | None, int, int]]:
        """(node, first row, rows) of each node's block (one block, node None, on one machine)."""
        return node_blocks(self.devices)


def node_blocks(devices: Sequence[str]) -> list[tuple[str | None, int, int]]:
    """(node, first row, rows) of each node's block of rows, in the devices' order (engine.devices.node_groups)."""
    blocks, first = [], 0
    for node, names in node_groups(list(devices)):
        blocks.append((node, first, len(names)))
        first += len(names)
    return blocks


@dataclass(frozen=True)
class Figure:
    name: str                       # slug for file names: <id>-<name>.<ext>
    title: str
    x: Axis
    y: Axis
    series: list[Series] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    bars: Bars | None = None
    lanes: Lanes | None = None
    heat: Heat | None = None        # a device-by-time heatmap (engine/figures/heatmap.py); series: its node means
    y_range: tuple[float | None, float | None] = (None, None)   # either end pinned (0..100 for utilization)
    columns: list[str] = field(default_factory=list)           # CSV header, units in brackets: "t (ms)"
    rows: list[list] = field(default_factory=list)

    def with_data(self, **changes) -> Figure:
        """This frame (or figure) with its title, series, bars, lanes, marks or table replaced."""
        return dataclasses.replace(self, **changes)

    def series_named(self, name: str) -> Series | None:
        return next((s for s in self.series if s.name == name), None)

    @property
    def has_data(self) -> bool:
        if self.bars is not None:
            return any(is_number(v) for v in self.bars.values)
        if self.lanes is not None:
            return bool(self.lanes.intervals or self.lanes.folded)
        if self.heat is not None:
            return any(v is not None for row in self.heat.values for v in row)
        return any(s.points() for s in self.series)


def series_table(series: Sequence[Series], x: Axis, y: Axis) -> tuple[list[str], list[list]]:
    """(columns, rows) of curves that share no x values (a plot's live series): one row per measured point
    (not the breaks at a gap, engine/figures/gaps.py)."""
    rows = [[s.name, xv, yv] for s in series for xv, yv in zip(s.x, s.y, strict=True) if is_number(yv)]
    return ["series", x.text, y.text], rows
