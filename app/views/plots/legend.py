"""LegendRow: a plot's legend in a row of its own, between its title and its curves: it never covers data.

pyqtgraph's legend floats over the view box: on a 1280x800 screen a plot's data
area is a hundred pixels tall and its legend covered most of it. This one takes
the row of the plot's top axis (hidden on every plot here) in the plot's own
layout: the curves get the rest. Its entries wrap onto more lines as the plot
narrows, never inside one entry; hidden from the plot's context menu
("Show legend"), it takes no room at all.
"""
from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.views import theme

LEGEND_POINTS = 8.0
# A line sample for each dash of engine/figures/palette.py DASHES: solid, dashed, dotted, dash-dot.
DASH_SAMPLES = ["━━", "╍╍", "┅┅", "━·"]
LARGE = 1e6   # no upper bound on the width


class LegendRow(pg.GraphicsWidget):
    def __init__(self, plot_item: pg.PlotItem):
        super().__init__()
        self.text = QtWidgets.QGraphicsTextItem(self)
        font = self.text.font()
        font.setPointSizeF(LEGEND_POINTS)
        self.text.setFont(font)
        self.text.setDefaultTextColor(QtGui.QColor(theme.FOREGROUND))
        self.text.document().setDocumentMargin(1)
        self.entries: dict[str, tuple[str, str, int]] = {}   # key -> (name, colour, dash), in drawing order
        self.wanted = True                                    # the user's (or the plot's) choice
        self.action: QtGui.QAction | None = None              # the context menu's "Show legend", kept in step
        self._height = 0.0
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Fixed)
        layout = plot_item.layout
        layout.removeItem(plot_item.getAxis("top"))  # hidden on every plot: its row (1, 1) is the legend's
        layout.addItem(self, 1, 1)
        QtWidgets.QGraphicsWidget.setVisible(self, False)

    # -- entries ---------------------------------------------------------------------
    def add(self, key: str, name: str, color: str, dash: int = 0) -> None:
        self.entries[key] = (name, color, dash)
        self._refresh()

    def remove(self, key: str) -> None:
        if self.entries.pop(key, None) is not None:
            self._refresh()

    def clear(self) -> None:
        self.entries.clear()
        self._refresh()

    def names(self) -> list[str]:
        return [name for name, _, _ in self.entries.values()]

    # -- visibility: the user's choice, and room only while there is something to show ---------
    def setVisible(self, visible: bool) -> None:  # noqa: N802  (Qt naming: callers hide and show it)
        self.wanted = bool(visible)
        if self.action is not None and self.action.isChecked() != self.wanted:
            self.action.blockSignals(True)
            self.action.setChecked(self.wanted)
            self.action.blockSignals(False)
        self._refresh()

    def hide(self) -> None:
        self.setVisible(False)

    def show(self) -> None:
        self.setVisible(True)

    @property
    def shown(self) -> bool:
        return self.wanted and bool(self.entries)

    # -- layout ------------------------------------------------------------------------
    def sizeHint(self, which, constraint=None):  # noqa: N802
        if which == QtCore.Qt.SizeHint.MaximumSize:
            return QtCore.QSizeF(LARGE, self._height)
        return QtCore.QSizeF(0, self._height)  # any width: the entries wrap to it

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit()

    def _refresh(self) -> None:
        shown = self.shown
        QtWidgets.QGraphicsWidget.setVisible(self, shown)
        self.text.setHtml("&emsp; ".join(self._entry(*entry) for entry in self.entries.values()) if shown else "")
        self._fit()

    def _fit(self) -> None:
        """Wrap to the row's width; a change of height relayouts the plot (the curves give the room)."""
        self.text.setTextWidth(max(self.size().width(), 40.0))
        height = self.text.boundingRect().height() if self.shown else 0.0
        if height != self._height:
            self._height = height
            self.updateGeometry()

    @staticmethod
    def _entry(name: str, color: str, dash: int) -> str:
        sample = DASH_SAMPLES[dash % len(DASH_SAMPLES)]
        # non-breaking spaces: a line breaks between entries, never inside one
        return (f"<span style='color:{color}'>{sample}</span>&nbsp;"
                + html.escape(name).replace(" ", "&nbsp;"))
