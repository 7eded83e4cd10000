"""MemoryView: each device's tensor memory by kind and its communication per step, as stacked bars.

Both figures are engine/figures/run.py's (``tensor_memory_figure``,
``communication_figure``), the ones the exports draw: from the last step's
reports while a run goes (app/state/live_data.py ``RunProgress.memory_figures``),
from the summary for a finished or stored run.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from app.views import theme
from app.views.plots.hover import Found, quantity
from app.views.plots.series_plot import SeriesPlot
from engine.figures.figure import Figure
from engine.figures.numbers import is_number
from engine.figures.run import COMMUNICATION, PEAK_PREFIX, TENSOR_MEMORY


class StackedBars(SeriesPlot):
    """A figure's bars, each the stack of its segments in their colours, one legend entry per segment."""

    def __init__(self, frame: Figure, parent: QtWidgets.QWidget | None = None):
        super().__init__(frame.title, frame.y.label, frame.y.unit, x_label=frame.x.label, x_units=frame.x.unit,
                         export_name=frame.name, parent=parent)
        item = self.getPlotItem()
        item.setClipToView(False)
        item.setDownsampling(auto=False)
        item.showGrid(x=False, y=True, alpha=theme.GRID_ALPHA)
        item.getAxis("bottom").enableAutoSIPrefix(False)   # the ticks are device names
        self._items: list[pg.GraphicsObject] = []
        self.segment_heights: dict[str, list[float]] = {}   # what is drawn: each segment's height per bar

    def show_figure(self, figure: Figure) -> None:
        item = self.getPlotItem()
        for old in self._items:
            item.removeItem(old)
        self._items = []
        self.legend.clear()
        self.segment_heights = {}
        self.show_title(figure.title)
        self.set_axes(figure.x, figure.y)
        self.figure = figure
        bars = figure.bars
        labels = bars.labels if bars is not None else []
        x = np.arange(len(labels), dtype=float)
        bottom = np.zeros(len(labels))
        for segment in (bars.segments or []) if bars is not None else []:
            heights = np.asarray([v if is_number(v) else 0.0 for v in segment.values], dtype=float)
            drawn = pg.BarGraphItem(x=x, y0=bottom.copy(), height=heights, width=0.6, brush=pg.mkBrush(segment.color),
                                    pen=pg.mkPen(theme.PANEL))
            item.addItem(drawn)
            self._items.append(drawn)
            self.legend.add(segment.name, segment.name, segment.color)
            self.segment_heights[segment.name] = heights.tolist()
            bottom += heights
        item.getAxis("bottom").setTicks([list(enumerate(labels))])
        item.setXRange(-0.6, max(len(labels), 1) - 0.4, padding=0)
        item.setYRange(0, float(bottom.max()) * 1.12 if len(labels) and bottom.max() > 0 else 1.0, padding=0)

    def point_at(self, x: float, y: float) -> Found | None:
        """The bar under the cursor: its device, each segment's value and the total."""
        figure = self.figure
        if figure is None or figure.bars is None:
            return None
        i = int(round(x))
        if not 0 <= i < len(figure.bars.labels) or abs(x - i) > 0.4:
            return None
        lines = [figure.bars.labels[i]]
        lines += [quantity(s.name, s.values[i], figure.y.unit) for s in figure.bars.segments or []
                  if is_number(s.values[i])]
        lines.append(quantity("total", figure.bars.values[i], figure.y.unit))
        # fsdp's tracked step (engine/figures/run.py tensor_memory_figure): its peak by torch's kinds.
        peak = [(column, figure.rows[i][k]) for k, column in enumerate(figure.columns or [])
                if column.startswith(PEAK_PREFIX) and i < len(figure.rows) and is_number(figure.rows[i][k])]
        if peak:
            lines.append("step peak (torch's FSDPMemTracker):")
            lines += ["  " + quantity(column[len(PEAK_PREFIX):].removesuffix(" (MiB)"), value, figure.y.unit)
                      for column, value in peak]
        return Found("\n".join(lines), float(i), float(figure.bars.values[i] or 0.0))


class MemoryView(QtWidgets.QWidget):
    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("memoryView")
        self.memory_plot = StackedBars(TENSOR_MEMORY)
        self.comm_plot = StackedBars(COMMUNICATION)
        self.note = QtWidgets.QLabel("Tensor memory per device by kind, and what each device's collectives "
                                     "moved per step: shown for the run in view.")
        self.note.setObjectName("muted")
        self.note.setWordWrap(True)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        plots = QtWidgets.QHBoxLayout()
        plots.addWidget(self.memory_plot, 1)
        plots.addWidget(self.comm_plot, 1)
        layout.addLayout(plots, 1)
        layout.addWidget(self.note)

    def show_figures(self, memory: Figure, communication: Figure) -> None:
        self.memory_plot.show_figure(memory)
        self.comm_plot.show_figure(communication)
