"""ExperimentResultsView: an experiment's result as the tutorial showed it.

Bars of step time (mean ± std over the repeats, the best highlighted), a sweep
line with error bars and the best marked when the points sweep a number (split
size, split point, device count), and a table of every point's throughput,
bubble and runs. The best is the one the result names (engine/experiments/reduction.py
best_and_tied), marked alike in all three (``best_marks``), none when points are tied within
their spread; every bar keeps a label at any width: whole, on two lines, or elided to its bar's room (``fit_label``).
The charts draw the experiment's figure definitions (engine.figures: the
exports' step-time and sweep figures, names, units, colours and marks alike),
with pyqtgraph on the SeriesPlot base, so each keeps the PNG/SVG/PDF/CSV export
of its context menu.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.views import theme
from app.views.plots.series_plot import SeriesPlot
from engine.experiments.presets import preset_title
from engine.figures import Figure, experiment_figures, palette
from engine.figures.experiment import stat, sweep_metric
from engine.figures.figure import Mark
from engine.figures.numbers import is_number as _number, time_unit
from engine.results import ExperimentPoint, ExperimentResult

BEST_COLOR = palette.BEST
TABLE_COLUMNS = ("point", "strategy", "devices", "split", "µ-batches", "step time (ms)", "predicted (ms)", "samples/s",
                 "bubble meas. / theory", "stage balance", "MFU", "samples/J", "runs", "note")
STEP_TIME_COLUMN = TABLE_COLUMNS.index("step time (ms)")


def _pm(mean: float | None, std: float | None, scale: float = 1.0, spec: str = ",.1f") -> str:
    if mean is None:
        return "—"
    text = format(mean * scale, spec)
    return text + (f" ± {format(std * scale, spec)}" if std is not None else "")


def _balance_text(point: ExperimentPoint) -> str:
    """"0.94 (65% | 69%)": the least over the most busy stage, then each stage's busy share."""
    balance = point.stage_balance
    busy = [b for b in point.stage_busy or [] if _number(b)]
    if not _number(balance) or not busy:  # without stage_busy: an earlier, not comparable, figure
        return "—"
    return f"{balance:.2f} ({' | '.join(format(b, '.0%') for b in busy)})"


def _compact(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "—"
    return "—" if value is None else str(value)


def shared_prefix(labels: list[str]) -> tuple[str, list[str]]:
    """("split size", ["4", "8", "16"]) for a sweep's labels: short ticks that do not run into each other."""
    if len(labels) < 2:
        return "", list(labels)
    words = [label.split(" ") for label in labels]
    n = 0
    while all(len(w) > n + 1 for w in words) and len({tuple(w[:n + 1]) for w in words}) == 1:
        n += 1
    if n == 0:
        return "", list(labels)
    return " ".join(words[0][:n]), [" ".join(w[n:]) for w in words]


def _two_lines(label: str, longest: int = 12) -> str:
    """"balanced\n(automatic)": a label longer than ``longest`` characters split at its middle space (the
    ticks of a plot not laid out yet, whose room is unknown)."""
    if len(label) <= longest or " " not in label:
        return label
    spaces = [i for i, c in enumerate(label) if c == " "]
    cut = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "\n" + label[cut + 1:]


def halves(label: str) -> tuple[str, str] | None:
    """The label on two lines, cut at the space or after the hyphen nearest its middle
    ("model-" "parallel"); None when it has neither."""
    cuts = [(i, i + 1) for i, c in enumerate(label) if c == " "]
    cuts += [(i + 1, i + 1) for i, c in enumerate(label[:-1]) if c == "-" and i > 0]
    if not cuts:
        return None
    end, start = min(cuts, key=lambda cut: abs(cut[0] - len(label) / 2))
    return label[:end], label[start:]


def elide(text: str, room: float, width: Callable[[str], float]) -> str:
    """``text`` cut to ``room`` pixels with "…"; at the least its first character and "…"."""
    if width(text) <= room:
        return text
    for n in range(len(text) - 1, 1, -1):
        shorter = text[:n].rstrip() + "…"
        if width(shorter) <= room:
            return shorter
    return text[:1] + "…"


def fit_label(label: str, room: float, width: Callable[[str], float]) -> str:
    """A bar's tick text within ``room`` pixels (``width`` measures a line): whole, else on two lines, else
    each line elided. pyqtgraph draws tick texts over each other, or drops one past the axis' ends: a text
    that fits its bar's room does neither. The table names every point whole."""
    if width(label) <= room:
        return label
    two = halves(label)
    if two is None:
        return elide(label, room, width)
    return "\n".join(elide(line, room, width) for line in two)


def _tick_each(xs: list[float]) -> bool:
    """A tick at each swept value (split points, device counts: no 2.5 between them) when they are whole
    numbers spread out enough to label; otherwise pyqtgraph's own ticks (split sizes 1, 3, 5 .. 60 would
    print on top of each other)."""
    if not xs or len(xs) > 12 or not all(x.is_integer() for x in xs):
        return False
    gaps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    return not gaps or min(gaps) >= (xs[-1] - xs[0]) / 12


LABEL_GAP_PX = 8   # between neighbouring bars' tick texts


class StepTimeBars(SeriesPlot):
    """One bar per measured point: mean step time, with the std as an error bar; the best bar in BEST.
    ``tick_texts``: each bar's label as drawn, refitted to the bars' room whenever the plot is resized."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__("Step time per point (mean ± std)", "step time", "ms", x_label="point", x_units=None,
                         export_name="experiment-step-time", parent=parent)
        self.getPlotItem().setClipToView(False)
        self.getPlotItem().setDownsampling(auto=False)
        self.getPlotItem().showGrid(x=False, y=True, alpha=theme.GRID_ALPHA)  # no lines through the bars
        self.legend.hide()   # one series: the tick labels name the bars
        self.labels: list[str] = []
        self.means: list[float] = []
        self.stds: list[float] = []
        self.best_label: str | None = None   # the bar drawn in BEST
        self.tick_texts: list[str] = []
        self.label_room: float | None = None  # pixels per bar's label; None before the plot is laid out
        self._ticks: list[str] = []
        self._items: list[pg.GraphicsObject] = []
        self.getPlotItem().getViewBox().sigResized.connect(lambda _view: self._fit_ticks())

    def show_figure(self, figure: Figure) -> None:
        """Draw the figure's bars: those with a value (a failed point has none), in its colours and units."""
        item = self.getPlotItem()
        for old in self._items:
            item.removeItem(old)
        self._items = []
        self.clear_series()
        self.set_axes(figure.x, figure.y)
        bars = figure.bars
        drawn = [(i, label, value, (bars.errors or [None] * len(bars.labels))[i])
                 for i, (label, value) in enumerate(zip(bars.labels, bars.values, strict=True)) if _number(value)]
        self.labels = [label for _, label, _, _ in drawn]
        self.means = [value for _, _, value, _ in drawn]
        self.stds = [error if _number(error) else 0.0 for _, _, _, error in drawn]
        self.best_label = next((label for i, label, _, _ in drawn if i == bars.best), None)
        self.figure = figure
        if not drawn:
            self._ticks = []
            self._fit_ticks()
            return
        x = np.arange(len(drawn), dtype=float)
        brushes = [pg.mkBrush(palette.BEST if i == bars.best else bars.color) for i, _, _, _ in drawn]
        plotted = pg.BarGraphItem(x=x, height=np.asarray(self.means), width=0.6, brushes=brushes,
                                  pen=pg.mkPen(theme.PANEL))
        errors = pg.ErrorBarItem(x=x, y=np.asarray(self.means), height=2 * np.asarray(self.stds), beam=0.25,
                                 pen=pg.mkPen(theme.FOREGROUND, width=1.4))
        for extra in (plotted, errors):
            item.addItem(extra)
            self._items.append(extra)
        prefix, self._ticks = shared_prefix(self.labels)
        item.setLabel("bottom", prefix or figure.x.text, color=theme.MUTED)
        item.setXRange(-0.6, len(drawn) - 0.4, padding=0)
        item.setYRange(0, max(m + s for m, s in zip(self.means, self.stds, strict=True)) * 1.12 or 1.0, padding=0)
        self._fit_ticks()

    def _fit_ticks(self) -> None:
        """Each bar's label fitted to its room (``fit_label``), and the axis as tall as its lines."""
        axis = self.getPlotItem().getAxis("bottom")
        metrics = QtGui.QFontMetricsF(axis.style.get("tickFont") or QtGui.QFont())  # the font ticks are drawn in
        width = self.getPlotItem().getViewBox().width()
        # The x range is -0.6 .. n - 0.4: each bar has n + 0.2 parts of the width.
        self.label_room = width / (len(self._ticks) + 0.2) - LABEL_GAP_PX if width > 0 and self._ticks else None
        if self.label_room is None:
            self.tick_texts = [_two_lines(tick) for tick in self._ticks]
        else:
            self.tick_texts = [fit_label(tick, self.label_room, metrics.horizontalAdvance) for tick in self._ticks]
        axis.setTicks([list(enumerate(self.tick_texts))])
        lines = max([text.count("\n") + 1 for text in self.tick_texts] + [1])
        # A text taller than the axis is dropped, and pyqtgraph grows the axis only after a paint.
        axis.setStyle(autoExpandTextSpace=False, tickTextHeight=int(lines * metrics.lineSpacing()) + 2)


class SweepPlot(SeriesPlot):
    """The swept value against step time (or throughput): one line per strategy, error bars, the best marked."""

    def __init__(self, parent: QtWidgets.QWidget | None = None, *, title: str = "Over the sweep (mean ± std)",
                 y_label: str = "step time", y_units: str = "ms", export_name: str = "experiment-sweep"):
        super().__init__(title, y_label, y_units, x_label="swept value", x_units=None, export_name=export_name,
                         parent=parent)
        self.getPlotItem().setClipToView(False)
        self.getPlotItem().setDownsampling(auto=False)
        self.best_xy: tuple[float, float] | None = None
        self.best_label: str | None = None   # the point the best mark names

    def show_figure(self, figure: Figure | None, off_sweep: Mark | None = None) -> bool:
        """Draw the sweep figure; False (and nothing drawn) when there is none or no point has a value.
        ``off_sweep``: the best's mark when the best is no swept point (the automatic split)."""
        self.clear_series()
        self.best_xy = None
        self.best_label = None
        if figure is None or not figure.has_data:
            return False
        if off_sweep is not None and not any(_number(m.y) for m in figure.marks):
            figure = dataclasses.replace(figure, marks=[*figure.marks, off_sweep])
        self.draw_figure(figure)
        xs = sorted({float(x) for s in figure.series for x, y in zip(s.x, s.y, strict=True)
                     if _number(x) and _number(y)})
        self.getPlotItem().getAxis("bottom").setTicks([[(x, str(int(x))) for x in xs]] if _tick_each(xs) else None)
        best = next((m for m in figure.marks if _number(m.y)), None)
        if best is not None:
            self.best_xy = (float(best.x), float(best.y))
            self.best_label = best.label.removeprefix("best: ")
        return True


def off_sweep_best(result: ExperimentResult) -> Mark | None:
    """The best's mark on the sweep when the best is not a swept point but the automatic split is one place
    on it (split-point's "balanced (automatic)"); None otherwise (the figure marks a swept best itself)."""
    best = result.point(result.winner) if result.winner else None
    automatic = result.automatic_split
    if best is None or _number(best.x) or not automatic or len(automatic) != 1 or not _number(automatic[0]):
        return None
    key, _ = sweep_metric(result.name)
    y = stat(best, key, "mean")
    if not _number(y):
        return None
    # The sweep figure's unit (engine.figures.experiment.sweep_figure): ms when every mean is under a second.
    factor = 1.0 if key == "throughput" else time_unit(stat(p, key, "mean") for p in result.points)[1]
    return Mark(automatic[0], f"best: {best.label}", y * factor)


class ExperimentResultsView(QtWidgets.QWidget):
    """Shows one experiment's result dict (engine.experiments' JSON); ``show_result`` replaces it."""

    sigExported = QtCore.Signal(str)
    sigExportFailed = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.result: ExperimentResult | None = None
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.title = QtWidgets.QLabel("No experiment yet: pick one in the Experiments menu, or select one "
                                      "in History › Experiments.")
        self.title.setObjectName("modeLabel")
        self.title.setWordWrap(True)
        layout.addWidget(self.title)
        self.subtitle = QtWidgets.QLabel("")
        self.subtitle.setObjectName("muted")
        self.subtitle.setWordWrap(True)
        layout.addWidget(self.subtitle)
        charts = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.bars = StepTimeBars()
        self.sweep = SweepPlot()
        # the input-pipeline sweep's second question: how long the most starved device waits on its batches
        self.input_wait = SweepPlot(title="Input wait over the sweep", y_label="input wait", y_units="%",
                                    export_name="experiment-input-wait")
        self.input_wait.setObjectName("inputWaitPlot")
        charts.addWidget(self.bars)
        charts.addWidget(self.sweep)
        charts.addWidget(self.input_wait)
        self.sweep.hide()
        self.input_wait.hide()
        for plot in (self.bars, self.sweep, self.input_wait):
            plot.sigExported.connect(self.sigExported)
            plot.sigExportFailed.connect(self.sigExportFailed)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.addWidget(charts)
        self.table = QtWidgets.QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setObjectName("experimentTable")
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout.addWidget(split, 1)

    @property
    def experiment_id(self) -> str | None:
        return self.result.experiment_id if self.result else None

    def point_labels(self) -> list[str]:
        return list(self.bars.labels)

    def best_marks(self) -> dict[str, str | None]:
        """The point each part marks as the best: the bar in BEST, the table's starred row, the sweep's mark
        (None where a part marks none, or the sweep is hidden)."""
        starred = [self.table.item(r, 0).text().removeprefix("★ ") for r in range(self.table.rowCount())
                   if self.table.item(r, 0) is not None and self.table.item(r, 0).text().startswith("★ ")]
        return {"bars": self.bars.best_label, "table": starred[0] if len(starred) == 1 else None,
                "sweep": None if self.sweep.isHidden() else self.sweep.best_label}

    def show_result(self, result: ExperimentResult, description: str = "") -> None:
        self.result = result
        name = result.name or "experiment"
        if not result.name:  # the figures' titles name the experiment
            result = dataclasses.replace(result, name=name)
        points = result.points
        best = result.winner
        status = result.status
        runs = sum(len(p.run_ids) for p in points)
        verdict = result.verdict()
        self.title.setText(f"{preset_title(name)} · {status} · {len(points)} point{'s' if len(points) != 1 else ''}, "
                           f"{runs} run{'s' if runs != 1 else ''}" + (f" · {verdict}" if verdict else ""))
        bits = [description] if description else []
        bits.append(result.experiment_id or "")
        if result.automatic_split:
            bits.append(f"automatic balanced split: {_compact(result.automatic_split)}")
        bits += result.rankings()   # how much of the hardware each point used, beside how fast it was
        bits += result.notes
        self.subtitle.setText(" · ".join(b for b in bits if b))

        figures = {f.name: f for f in experiment_figures(result, preset_title(result.name))}
        self.bars.show_figure(figures["step-time"])
        self.sweep.setVisible(self.sweep.show_figure(figures.get("sweep"), off_sweep_best(result)))
        waits = figures.get("input-wait")
        self.input_wait.setVisible(self.input_wait.show_figure(waits if waits is not None and waits.series else None))
        # Two sweeps say what the loader's workers do; the step times are the table's then (three plots do not
        # fit the window's width).
        self.bars.setVisible(self.input_wait.isHidden())
        self._fill_table(points, best, [result.best, *result.tied] if result.tied else [])

    def _fill_table(self, points: list[ExperimentPoint], best: str | None, tied: list[str]) -> None:
        self.table.setRowCount(len(points))
        bold = QtGui.QFont()
        bold.setBold(True)
        for r, p in enumerate(points):
            measured, theory = p.bubble.measured, p.bubble.theory
            bubble_text = "—" if p.error else (
                f"{'—' if not _number(measured) else format(measured, '.1%')} / "
                f"{'n/a' if not _number(theory) else format(theory, '.1%')}")
            label = p.label
            values = [
                ("★ " if label == best else "≈ " if label in tied else "") + label,
                p.strategy or "—",
                _compact(p.devices or None),
                _compact(p.split),
                _compact(p.micro_batches),
                _pm(stat(p, "step_time_s", "mean"), stat(p, "step_time_s", "std"), 1000.0, ",.2f"),
                f"{p.predicted_step_s * 1000:,.2f}" if p.predicted_step_s else "—",
                _pm(stat(p, "throughput", "mean"), stat(p, "throughput", "std"), 1.0, ",.0f"),
                bubble_text,
                _balance_text(p),
                "—" if not _number(p.mfu) else format(p.mfu, ".1%"),
                "—" if not _number(p.samples_per_joule) else format(p.samples_per_joule, ".3g"),
                str(len(p.run_ids)),
                p.error.splitlines()[0][:160] if p.error else "",
            ]
            for c, text in enumerate(values):
                item = QtWidgets.QTableWidgetItem(text)
                if label == best:
                    item.setFont(bold)
                    item.setForeground(QtGui.QColor(BEST_COLOR))
                if c == len(values) - 1 and p.error:
                    item.setForeground(QtGui.QColor(theme.ERROR))
                    item.setToolTip(p.error)
                if c == STEP_TIME_COLUMN:
                    item.setToolTip(_spread_text(p, label in tied))
                    if p.disturbed:
                        item.setForeground(QtGui.QColor(theme.WARNING))
                self.table.setItem(r, c, item)


def _spread_text(point: ExperimentPoint, tied: bool) -> str:
    """The step-time cell's tooltip: the runs' range, whether it ties with the fastest, and a disturbance."""
    lines = []
    if point.step_time_range:
        low, high = point.step_time_range
        lines.append(f"runs' mean step times {low * 1000:,.2f} – {high * 1000:,.2f} ms")
    if tied:
        lines.append("within the fastest point's spread: tied, not told apart by this measurement")
    if point.disturbed:
        lines.append(point.disturbed)
    return "\n".join(lines)
