"""RunMarks: the lines where runs started and ended, across the live telemetry plots.

Their labels ("run 182154", "end") stack in rows from the top of each plot
(series_plot.stack_labels, the rule of engine/figures/label_rows.py): two that
are close take different rows, an experiment's many short runs fill the rows and
the labels that find none are hidden, their lines kept. The rows are worked out
again when a mark comes and when a plot is resized (a label's width in seconds
depends on the plot's width).
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore

from app.views import theme
from app.views.plots.series_plot import SeriesPlot, stack_labels

KEPT = 8            # marks kept per plot: the lines of the last few runs
LABEL_POINTS = 8.0  # as the legend's text


class RunMarks:
    def __init__(self, plots: list[SeriesPlot]):
        self.lines: dict[SeriesPlot, list[pg.InfiniteLine]] = {plot: [] for plot in plots}
        self.shown = True
        for plot in plots:
            plot.getPlotItem().getViewBox().sigResized.connect(lambda _view, p=plot: self.stack(p))

    def add(self, t: float, text: str) -> None:
        """A line at telemetry time ``t`` on every plot, labelled ``text``."""
        for plot, lines in self.lines.items():
            line = pg.InfiniteLine(pos=t, angle=90, movable=False,
                                   pen=pg.mkPen(theme.MUTED, width=1, style=QtCore.Qt.PenStyle.DotLine),
                                   label=text, labelOpts={"position": 0.95, "color": theme.MUTED,
                                                          "anchors": [(0, 0), (0, 0)]})
            font = line.label.textItem.font()
            font.setPointSizeF(LABEL_POINTS)   # a row less tall: more rows fit a short plot
            line.label.setFont(font)
            lines.append(line)
            if self.shown:
                plot.addItem(line)
            while len(lines) > KEPT:
                old = lines.pop(0)
                if old.scene() is not None:
                    plot.removeItem(old)
            self.stack(plot)

    def stack(self, plot: SeriesPlot) -> None:
        stack_labels(plot.getPlotItem().getViewBox(), self.lines[plot])

    def texts(self, plot: SeriesPlot) -> list[str]:
        return [line.label.toPlainText() for line in self.lines[plot]]

    def hide(self) -> None:
        """A stored run in view: its time axis is not the live one."""
        self.shown = False
        for plot, lines in self.lines.items():
            for line in lines:
                if line.scene() is not None:
                    plot.removeItem(line)

    def restore(self) -> None:
        self.shown = True
        for plot, lines in self.lines.items():
            for line in lines:
                if line.scene() is None:
                    plot.addItem(line)
            self.stack(plot)
