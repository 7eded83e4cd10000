"""ExperimentResultsView: an experiment's result as the tutorial showed it.

Bars of step time (mean ± std over the repeats, the best highlighted), a sweep
line with error bars and the best marked when the points sweep a number (split
size, split point, device count), and a table of every point's throughput,
bubble and runs. Drawn with pyqtgraph on the SeriesPlot base, so each chart
keeps the PNG/SVG/CSV export of its context menu.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.views import theme
from app.views.series_plot import SeriesPlot

BEST_COLOR = theme.OK
TABLE_COLUMNS = ("point", "strategy", "devices", "split", "µ-batches", "step time (ms)", "samples/s",
                 "bubble meas. / theory", "stage balance", "runs", "note")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _stat(point: dict, key: str, part: str) -> float | None:
    value = point.get(key)
    if isinstance(value, dict) and _number(value.get(part)):
        return float(value[part])
    return None


def _pm(mean: float | None, std: float | None, scale: float = 1.0, spec: str = ",.1f") -> str:
    if mean is None:
        return "—"
    text = format(mean * scale, spec)
    return text + (f" ± {format(std * scale, spec)}" if std is not None else "")


def _balance_text(point: dict) -> str:
    """"0.94 (65% | 69%)": the least over the most busy stage, then each stage's busy share."""
    balance = point.get("stage_balance")
    busy = [b for b in point.get("stage_busy") or [] if _number(b)]
    if not _number(balance) or not busy:  # without stage_busy: an earlier, not comparable, figure
        return "—"
    return f"{balance:.2f} ({' | '.join(format(b, '.0%') for b in busy)})"


def _compact(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "—"
    return "—" if value is None else str(value)


def sweep_metric(name: str | None) -> tuple[str, str, float, str]:
    """(summary key, axis label, scale, unit): dp-scaling is about throughput, the other sweeps about time."""
    if name == "dp-scaling":
        return "throughput", "throughput", 1.0, "samples/s"
    return "step_time_s", "step time", 1000.0, "ms"


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
    """"balanced\n(automatic)": a label longer than ``longest`` characters split at its middle space."""
    if len(label) <= longest or " " not in label:
        return label
    spaces = [i for i, c in enumerate(label) if c == " "]
    cut = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "\n" + label[cut + 1:]


def _tick_each(xs: list[float]) -> bool:
    """A tick at each swept value (split points, device counts: no 2.5 between them) when they are whole
    numbers spread out enough to label; otherwise pyqtgraph's own ticks (split sizes 1, 3, 5 .. 60 would
    print on top of each other)."""
    if not xs or len(xs) > 12 or not all(x.is_integer() for x in xs):
        return False
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    return not gaps or min(gaps) >= (xs[-1] - xs[0]) / 12


class StepTimeBars(SeriesPlot):
    """One bar per point: mean step time, with the std as an error bar; the best bar in green."""

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
        self._items: list[pg.GraphicsObject] = []

    def set_bars(self, labels: list[str], means: list[float], stds: list[float], best: int | None) -> None:
        item = self.getPlotItem()
        for old in self._items:
            item.removeItem(old)
        self._items = []
        self.labels, self.means, self.stds = list(labels), list(means), list(stds)
        self._data.clear()
        if not labels:
            item.getAxis("bottom").setTicks([[]])
            return
        x = np.arange(len(labels), dtype=float)
        brushes = [pg.mkBrush(BEST_COLOR if i == best else theme.device_color(0)) for i in range(len(labels))]
        bars = pg.BarGraphItem(x=x, height=np.asarray(means), width=0.6, brushes=brushes,
                               pen=pg.mkPen(theme.PANEL))
        errors = pg.ErrorBarItem(x=x, y=np.asarray(means), height=2 * np.asarray(stds), beam=0.25,
                                 pen=pg.mkPen(theme.FOREGROUND, width=1.4))
        for extra in (bars, errors):
            item.addItem(extra)
            self._items.append(extra)
        prefix, ticks = shared_prefix(labels)
        # pyqtgraph drops a tick text wider than the room around its tick: a long label
        # ("balanced (automatic)") goes on two lines rather than vanish.
        item.getAxis("bottom").setTicks([[(i, _two_lines(tick)) for i, tick in enumerate(ticks)]])
        item.setLabel("bottom", prefix or "point", color=theme.MUTED)
        # The data behind the bars, for the context menu's CSV export.
        self._data["mean (ms)"] = (x, np.asarray(means))
        self._data["std (ms)"] = (x, np.asarray(stds))
        item.setXRange(-0.6, len(labels) - 0.4, padding=0)
        item.setYRange(0, max(m + s for m, s in zip(means, stds)) * 1.12 or 1.0, padding=0)


class SweepPlot(SeriesPlot):
    """The swept value against step time (or throughput): one line per strategy, error bars, the best marked."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__("Over the sweep (mean ± std)", "step time", "ms", x_label="swept value", x_units=None,
                         export_name="experiment-sweep", parent=parent)
        self.getPlotItem().setClipToView(False)
        self.getPlotItem().setDownsampling(auto=False)
        self.best_xy: tuple[float, float] | None = None
        self._items: list[pg.GraphicsObject] = []

    def show_sweep(self, name: str | None, points: list[dict], best_label: str | None,
                   automatic_split: list | None) -> bool:
        """Draw the sweep; False (and nothing drawn) when the points sweep no number."""
        item = self.getPlotItem()
        for old in self._items:
            item.removeItem(old)
        self._items = []
        self.clear_series()
        self.best_xy = None
        key, label, scale, unit = sweep_metric(name)
        swept = [p for p in points if _number(p.get("x")) and _stat(p, key, "mean") is not None]
        if not swept:
            return False
        item.setLabel("left", label, units=unit, color=theme.MUTED)
        item.setLabel("bottom", {"split-size": "split size (samples per micro-batch)",
                                 "split-point": "split point (first block of stage 2)",
                                 "dp-scaling": "devices"}.get(name or "", "swept value"), color=theme.MUTED)
        by_strategy: dict[str, list[dict]] = {}
        for p in sorted(swept, key=lambda p: p["x"]):
            by_strategy.setdefault(str(p.get("strategy") or "points"), []).append(p)
        for i, (strategy, group) in enumerate(by_strategy.items()):
            x = np.array([float(p["x"]) for p in group])
            y = np.array([_stat(p, key, "mean") * scale for p in group])
            err = np.array([(_stat(p, key, "std") or 0.0) * scale for p in group])
            color = theme.run_color(i)
            self.set_series(strategy, x, y, color, name=strategy, width=2.0)
            self._curves[strategy].setSymbol("o")
            self._curves[strategy].setSymbolBrush(pg.mkBrush(color))
            self._curves[strategy].setSymbolSize(7)
            bars = pg.ErrorBarItem(x=x, y=y, height=2 * err, beam=0.0, pen=pg.mkPen(color, width=1.2))
            item.addItem(bars)
            self._items.append(bars)
        xs = sorted({float(p["x"]) for p in swept})
        item.getAxis("bottom").setTicks([[(x, str(int(x))) for x in xs]] if _tick_each(xs) else None)
        best = next((p for p in swept if p.get("label") == best_label), None)
        if best is not None:
            bx, by = float(best["x"]), _stat(best, key, "mean") * scale
            self.best_xy = (bx, by)
            star = pg.ScatterPlotItem([bx], [by], symbol="star", size=18, brush=pg.mkBrush(BEST_COLOR),
                                      pen=pg.mkPen(theme.BACKGROUND))
            # Below a minimum (step time), above a maximum (throughput): where the curve is not.
            anchor = (0.5, 1.4) if key == "throughput" else (0.5, -0.4)
            text = pg.TextItem(f"best: {best.get('label')}", color=BEST_COLOR, anchor=anchor)
            text.setPos(bx, by)
            for extra in (star, text):
                item.addItem(extra)
                self._items.append(extra)
        if isinstance(automatic_split, list) and len(automatic_split) == 1 and _number(automatic_split[0]):
            line = pg.InfiniteLine(pos=float(automatic_split[0]), angle=90, movable=False,
                                   pen=pg.mkPen(theme.MUTED, style=QtCore.Qt.PenStyle.DashLine),
                                   label="automatic split", labelOpts={"color": theme.MUTED, "position": 0.9})
            item.addItem(line)
            self._items.append(line)
        item.enableAutoRange()
        return True


class ExperimentResultsView(QtWidgets.QWidget):
    """Shows one experiment's result dict (engine.experiments' JSON); ``show_result`` replaces it."""

    sigExported = QtCore.Signal(str)
    sigExportFailed = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.result: dict | None = None
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
        charts.addWidget(self.bars)
        charts.addWidget(self.sweep)
        self.sweep.hide()
        for plot in (self.bars, self.sweep):
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
        return (self.result or {}).get("experiment_id")

    def point_labels(self) -> list[str]:
        return list(self.bars.labels)

    def show_result(self, result: dict, description: str = "") -> None:
        self.result = result
        name = result.get("name") or "experiment"
        points = [p for p in result.get("points") or [] if isinstance(p, dict)]
        best = result.get("best")
        status = result.get("status") or "finished"
        runs = sum(len(p.get("run_ids") or []) for p in points)
        self.title.setText(f"{name} · {status} · {len(points)} point{'s' if len(points) != 1 else ''}, "
                           f"{runs} run{'s' if runs != 1 else ''}" + (f" · best: {best}" if best else ""))
        bits = [description] if description else []
        bits.append(str(result.get("experiment_id") or ""))
        if result.get("automatic_split"):
            bits.append(f"automatic balanced split: {_compact(result['automatic_split'])}")
        bits += [str(note) for note in result.get("notes") or []]
        self.subtitle.setText(" · ".join(b for b in bits if b))

        timed = [p for p in points if _stat(p, "step_time_s", "mean") is not None]
        labels = [str(p.get("label")) for p in timed]
        means = [_stat(p, "step_time_s", "mean") * 1000 for p in timed]
        stds = [(_stat(p, "step_time_s", "std") or 0.0) * 1000 for p in timed]
        self.bars.set_bars(labels, means, stds, labels.index(best) if best in labels else None)
        self.sweep.setVisible(self.sweep.show_sweep(name, points, best, result.get("automatic_split")))
        self._fill_table(points, best)

    def _fill_table(self, points: list[dict], best: str | None) -> None:
        self.table.setRowCount(len(points))
        bold = QtGui.QFont()
        bold.setBold(True)
        for r, p in enumerate(points):
            bubble = p.get("bubble") if isinstance(p.get("bubble"), dict) else {}
            measured, theory = bubble.get("measured"), bubble.get("theory")
            bubble_text = "—" if not bubble else (
                f"{'—' if not _number(measured) else format(measured, '.1%')} / "
                f"{'n/a' if not _number(theory) else format(theory, '.1%')}")
            label = str(p.get("label"))
            values = [
                ("★ " if label == best else "") + label,
                str(p.get("strategy") or "—"),
                _compact(p.get("devices")),
                _compact(p.get("split")),
                _compact(p.get("micro_batches")),
                _pm(_stat(p, "step_time_s", "mean"), _stat(p, "step_time_s", "std"), 1000.0, ",.2f"),
                _pm(_stat(p, "throughput", "mean"), _stat(p, "throughput", "std"), 1.0, ",.0f"),
                bubble_text,
                _balance_text(p),
                str(len(p.get("run_ids") or [])),
                str(p.get("error") or "").splitlines()[0][:160] if p.get("error") else "",
            ]
            for c, text in enumerate(values):
                item = QtWidgets.QTableWidgetItem(text)
                if label == best:
                    item.setFont(bold)
                    item.setForeground(QtGui.QColor(BEST_COLOR))
                if c == len(values) - 1 and p.get("error"):
                    item.setForeground(QtGui.QColor(theme.ERROR))
                    item.setToolTip(str(p["error"]))
                self.table.setItem(r, c, item)
