"""Hover: what lies under the cursor, written beside it (a curve's point, a bar, a timeline's interval).

The scene's mouse moves come through a pg.SignalProxy at ``RATE_HZ`` at most:
a move costs one lookup (a bisection per curve), never a redraw of the plot.
The plot says what is at a view position (``describe``); this draws the answer
and keeps it in place while the live view scrolls under a still cursor.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pyqtgraph as pg
from PySide6 import QtCore

from app.views import theme
from engine.figures.numbers import format_value, is_number

RATE_HZ = 30


class Found(NamedTuple):
    """What the cursor is on: the text to show and the point it belongs to (view coordinates)."""
    text: str
    x: float
    y: float


def quantity(label: str, value, unit: str | None) -> str:
    """"utilization 45.2 %", "step 12": a value with its axis' name and unit."""
    if not is_number(value):
        return f"{label} n/a"
    number = format_value(value)
    return f"{label} {number} {unit}" if unit else f"{label} {number}"


class Hover(QtCore.QObject):
    def __init__(self, plot: pg.PlotWidget, describe: Callable[[float, float], Found | None],
                 marker: bool = True):
        super().__init__(plot)
        self.describe = describe
        item = plot.getPlotItem()
        self.view = item.getViewBox()
        self.label = pg.TextItem("", color=theme.FOREGROUND, fill=pg.mkBrush(20, 23, 28, 225),
                                 border=pg.mkPen(theme.MUTED), anchor=(0, 1))
        self.label.setZValue(1000)
        self.dot = pg.ScatterPlotItem(size=9, pen=pg.mkPen(theme.FOREGROUND, width=1.5), brush=None)
        self.dot.setZValue(999)
        for shown in (self.label, self.dot):
            shown.hide()
            self.view.addItem(shown, ignoreBounds=True)   # not a data item: no range, legend or export
        self.marker = marker
        self.scene_pos: QtCore.QPointF | None = None
        self.found: Found | None = None
        self.proxy = pg.SignalProxy(plot.scene().sigMouseMoved, rateLimit=RATE_HZ, slot=self.moved)
        # The live plots scroll under a still cursor: what it points at changes.
        self.view.sigRangeChanged.connect(self.refresh)
        plot.installEventFilter(self)   # the cursor left the plot: nothing is under it

    def eventFilter(self, watched, event) -> bool:  # noqa: N802  (Qt naming)
        if event.type() == QtCore.QEvent.Type.Leave:
            self.leave()
        return False

    def moved(self, args) -> None:
        """The proxy's slot: ``args[0]`` is the cursor's scene position."""
        self.scene_pos = args[0]
        self.refresh()

    def refresh(self, *_args) -> None:
        pos = self.scene_pos
        found = None
        if pos is not None and self.view.sceneBoundingRect().contains(pos):
            at = self.view.mapSceneToView(pos)
            found = self.describe(at.x(), at.y())
        self.found = found
        if found is None:
            self.label.hide()
            self.dot.hide()
            return
        self.label.setText(found.text)
        # beside the point, turned toward the middle of the view: it never leaves the plot
        point = self.view.mapViewToScene(QtCore.QPointF(found.x, found.y))
        middle = self.view.sceneBoundingRect().center()
        self.label.setAnchor((1 if point.x() > middle.x() else 0, 0 if point.y() < middle.y() else 1))
        self.label.setPos(found.x, found.y)
        self.label.show()
        if self.marker:
            self.dot.setData([found.x], [found.y])
            self.dot.show()

    def text(self) -> str:
        """What the hover says now ("" when the cursor is on nothing)."""
        return self.found.text if self.found is not None else ""

    def leave(self) -> None:
        self.scene_pos = None
        self.refresh()
