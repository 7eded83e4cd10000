"""PlanView: the pipeline schedule's own plan, what each device is to do at each tick, under one measured
step, and the what-if table.

The plan is torch.distributed.pipelining's action list for the run's schedule
(engine/figures/schedule_plan.py, reported by rank 0 with the run): a lane per device, a
cell per action, labelled F (forward), B (backward), I and W (a zero-bubble
schedule's input- and weight-gradient halves) with the micro-batch, in the
timeline's colours. Above it the run's last kept step as measured, each compute
interval labelled with the action it ran: where its gaps are not the plan's, the
machine and the plan disagree.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.views import theme
from engine.figures import palette
from engine.figures.schedule_plan import LETTER, measured_cells, schedule_plan_cells
from engine.figures.timeline import LANE_HEIGHT
from engine.planner.what_if import TRUST, TRUST_DETAIL

LIGHT_KINDS = {"backward-input"}   # light cells, labelled in dark text
DARK_TEXT = "#1f1f1f"
EMPTY = ("No plan: a pipeline schedule's plan shows here for a run of the pipeline strategy on CPU devices or "
         "distinct GPUs (the schedule's own action list, tick by tick).")


# Short headers, their words in tooltips: with the measured step and its error beside the prediction, the longer
# ones pushed the rows' Run buttons out of the Plan tab at 1280x800.
WHAT_IF_COLUMNS = ["schedule", "V", "m", "predicted", "measured", "error", "bubble", ""]
WHAT_IF_TIPS = ["the pipeline schedule", "stages per device", "micro-batches per step",
                "the step time the what-if predicts", "the mean step of the newest run of that row in this window"]
ERROR_TIP = ("The prediction's error: (predicted − measured) / measured. + the prediction was slower than the run, "
             "− faster. Measured: the mean step of the newest run of that row made in this window.")


def _lanes_plot(bottom_label: str) -> pg.PlotWidget:
    plot = pg.PlotWidget(background=theme.PANEL)
    item = plot.getPlotItem()
    item.setLabel("bottom", bottom_label, color=theme.MUTED)
    item.hideButtons()
    item.setMouseEnabled(x=True, y=False)
    item.getViewBox().invertY(True)
    theme.mute_axes(item)
    return plot


def _draw_cells(plot: pg.PlotWidget, cells: list[tuple], lanes: list[str],
                narrowest: float = 0.0) -> list[pg.TextItem]:
    """Cells (device, start, end, kind, stage, micro-batch) as bars in the timeline's colours, each labelled
    as torch writes the action ("0F1", the stage only where a device holds several) where it is at least
    ``narrowest`` wide (a measured step's short slices would overprint their neighbours); returns the labels."""
    item = plot.getPlotItem()
    item.clear()
    index = {device: i for i, device in enumerate(lanes)}
    for kind in dict.fromkeys(c[3] for c in cells):
        mine = [c for c in cells if c[3] == kind]
        item.addItem(pg.BarGraphItem(
            x0=np.array([c[1] for c in mine]), width=np.array([c[2] - c[1] for c in mine]) * 0.94,
            y0=np.array([index[c[0]] - LANE_HEIGHT / 2 for c in mine]), height=np.full(len(mine), LANE_HEIGHT),
            brush=palette.kind_color(kind), pen=None))
    stages_on = {d: {c[4] for c in cells if c[0] == d} for d in lanes}
    labels = []
    for device, t0, t1, kind, stage, micro_batch in cells:
        if t1 - t0 < narrowest:
            continue
        text = (f"{stage if len(stages_on[device]) > 1 else ''}{LETTER[kind]}"
                f"{'' if micro_batch is None else micro_batch}")
        label = pg.TextItem(text, color=DARK_TEXT if kind in LIGHT_KINDS else theme.FOREGROUND, anchor=(0.5, 0.5))
        label.setPos((t0 + t1) / 2, index[device])
        label.setToolTip(f"{device}: stage {stage}, {kind}, micro-batch {micro_batch}")
        item.addItem(label)
        labels.append(label)
    item.getAxis("left").setTicks([[(i, d) for i, d in enumerate(lanes)]])
    item.setYRange(-0.5, len(lanes) - 0.5, padding=0.05)
    return labels


class PlanView(QtWidgets.QWidget):
    sigRunPrediction = QtCore.Signal(str, int, int)   # schedule, stages per device, micro-batches: run it for real

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.measured_caption = QtWidgets.QLabel("")
        self.measured_caption.setObjectName("muted")
        self.measured_caption.setWordWrap(True)
        layout.addWidget(self.measured_caption)
        self.measured = _lanes_plot("time since the step began (ms)")
        layout.addWidget(self.measured, 1)
        self.caption = QtWidgets.QLabel(EMPTY)
        self.caption.setObjectName("muted")
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.plot = _lanes_plot("tick of the schedule")
        layout.addWidget(self.plot, 1)
        self.what_if_caption = QtWidgets.QLabel("")
        self.what_if_caption.setObjectName("muted")
        self.what_if_caption.setWordWrap(True)
        layout.addWidget(self.what_if_caption)
        self.what_if = QtWidgets.QTableWidget(0, len(WHAT_IF_COLUMNS))
        self.what_if.setObjectName("whatIfTable")
        self.what_if.setHorizontalHeaderLabels(WHAT_IF_COLUMNS)
        self.what_if.verticalHeader().hide()
        self.what_if.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.what_if.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.what_if.setMaximumHeight(180)
        layout.addWidget(self.what_if)
        self.show_predictions([])
        self.cells: list[tuple] = []
        self.labels: list[pg.TextItem] = []
        self.measured_cells: list[tuple] = []
        self.measured.hide()

    def show_plan(self, plan: list[list[str]] | None, devices: list[str], schedule: str | None) -> None:
        """Draw ``plan`` (per rank, tick by tick), or say there is none."""
        self.cells = schedule_plan_cells(plan or [], devices)
        if not self.cells:
            self.plot.getPlotItem().clear()
            self.labels = []
            self.caption.setText(EMPTY)
            return
        lanes = list(dict.fromkeys([*devices[:len(plan)], *(c[0] for c in self.cells)]))
        self.labels = _draw_cells(self.plot, self.cells, lanes)
        ticks = max(len(actions) for actions in plan)
        self.plot.getPlotItem().setXRange(0, ticks, padding=0.01)
        self.caption.setText(f"The {schedule or 'pipeline'} schedule's plan: torch.distributed.pipelining's own action "
                             f"list, {ticks} ticks. F forward, B backward, I/W input/weight gradient, with the "
                             "micro-batch.")

    def show_measured_step(self, plan: list[list[str]] | None, devices: list[str], rows: list[tuple]) -> None:
        """One measured step (timeline ``rows`` of a step: step, device, kind, t0, t1) above the plan, each compute
        interval named by the plan's action it ran (engine.figures.schedule_plan.measured_actions); hidden without
        both."""
        self.measured_cells = measured_cells(plan or [], devices, rows)
        self.measured.setVisible(bool(self.measured_cells))
        if not self.measured_cells:
            self.measured_caption.setText("")
            return
        lanes = list(dict.fromkeys([*devices, *(c[0] for c in self.measured_cells)]))
        span = max(c[2] for c in self.measured_cells)
        _draw_cells(self.measured, self.measured_cells, lanes, narrowest=span / 40)
        self.measured.getPlotItem().setXRange(0, span, padding=0.01)
        self.measured_caption.setText(
            f"Step {rows[0][0]} as measured: each device's compute in time, named by the action of the plan below "
            "it ran. Where the gaps here are not the plan's idle ticks, the machine and the plan disagree (the "
            "Plots tab's timeline shows every interval).")

    def show_predictions(self, predictions: list, runnable: bool = True, inputs: list[str] = (),
                         measured: list = (), source: tuple[str, str | None] | None = None) -> None:
        """engine.planner.what_if's predictions for the run in view, each row's button running it for real where
        ``runnable`` (the panel describes that run: a stored one's rows say how to get there instead);
        ``inputs``: what they took from the run's probes (what_if.measured_inputs), in the caption's tooltip;
        ``measured``: per row, the run of it (app/state/what_if_rows.py MeasuredRow) or None; ``source``: the run
        they are predicted from, and its disturbance if it was disturbed (the caption says so)."""
        table = self.what_if
        table.setRowCount(len(predictions))
        measured = list(measured) + [None] * (len(predictions) - len(measured))
        for row, (p, ran) in enumerate(zip(predictions, measured, strict=False)):
            cells = [p.schedule, str(p.stages_per_device), str(p.micro_batches), f"{p.step_time_s * 1e3:.1f} ms",
                     f"{ran.step_s * 1e3:.1f} ms" if ran else "", f"{100 * ran.error(p.step_time_s):+.1f} %"
                     if ran else "", f"{100 * p.bubble:.0f}%"]
            for column, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                if p.measured:
                    item.setToolTip("this run's own schedule and micro-batches: the fit, measured")
                elif ran is not None and column in (4, 5):
                    item.setToolTip(f"run {ran.run_id}" + (f", disturbed: {ran.disturbed}" if ran.disturbed else "")
                                    + f"\n{ERROR_TIP}")
                table.setItem(row, column, item)
            what = f"{p.schedule} with {p.stages_per_device} stage(s) per device and {p.micro_batches} micro-batches"
            button = QtWidgets.QPushButton("measured" if p.measured else "Run again" if ran else "Run")
            button.setEnabled(runnable and not p.measured)
            button.setToolTip(f"Run pipeline with {what} for real" if runnable
                              else f"A stored run's prediction: set its model, devices and batch in the panel, "
                                   f"then {what}, to run it")
            button.clicked.connect(lambda _=False, s=p.schedule, v=p.stages_per_device, m=p.micro_batches:
                                   self.sigRunPrediction.emit(s, v, m))
            table.setCellWidget(row, len(cells), button)
        for column, tip in enumerate([*WHAT_IF_TIPS, ERROR_TIP]):
            table.horizontalHeaderItem(column).setToolTip(tip)
        self.what_if.setVisible(bool(predictions))
        run_id, disturbed = source or (None, None)
        whose = f"What-if of run {run_id}" if run_id else "What-if"
        warned = f" · predicted from a disturbed run ({disturbed}): as uncertain as its times" if disturbed else ""
        self.what_if_caption.setText(f"{whose}: {TRUST}{warned}" if predictions else "")
        said = "".join(f"\n\nMeasured after the run: {line}." for line in inputs)
        self.what_if_caption.setToolTip(f"What-if: {TRUST_DETAIL}{said}" if predictions else "")

    def show_what_if_status(self, text: str) -> None:
        """While the what-if is computed, or why there is none: the caption alone."""
        self.show_predictions([])
        self.what_if_caption.setText(text)
