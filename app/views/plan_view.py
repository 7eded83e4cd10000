"""PlanView: the pipeline schedule's own plan, what each device is to do at each tick.

The plan is torch.distributed.pipelining's action list for the run's schedule
(engine/figures/plan.py, reported by rank 0 with the run): a lane per device, a
cell per action, labelled F (forward), B (backward), I and W (a zero-bubble
schedule's input- and weight-gradient halves) with the micro-batch, in the
timeline's colours. The Plots tab's timeline shows what the devices did; where
its gaps are not the plan's, the machine and the plan disagree.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.views import theme
from engine.figures import palette
from engine.figures.plan import KIND_OF, plan_cells
from engine.figures.timeline import LANE_HEIGHT
from engine.what_if import TRUST

LETTER = {kind: letter for letter, kind in KIND_OF.items()}
LIGHT_KINDS = {"backward-input"}   # light cells, labelled in dark text
DARK_TEXT = "#1f1f1f"
EMPTY = ("No plan: a pipeline schedule's plan shows here for a run of the pipeline strategy on CPU devices or "
         "distinct GPUs (the schedule's own action list, tick by tick).")


class PlanView(QtWidgets.QWidget):
    sigRunPrediction = QtCore.Signal(str, int)   # schedule, micro-batches: run this row for real

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.caption = QtWidgets.QLabel(EMPTY)
        self.caption.setObjectName("muted")
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.plot = pg.PlotWidget(background=theme.PANEL)
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "tick of the schedule", color=theme.MUTED)
        item.hideButtons()
        item.setMouseEnabled(x=True, y=False)
        item.getViewBox().invertY(True)
        theme.mute_axes(item)
        layout.addWidget(self.plot, 1)
        self.what_if_caption = QtWidgets.QLabel("")
        self.what_if_caption.setObjectName("muted")
        self.what_if_caption.setWordWrap(True)
        layout.addWidget(self.what_if_caption)
        self.what_if = QtWidgets.QTableWidget(0, 5)
        self.what_if.setObjectName("whatIfTable")
        self.what_if.setHorizontalHeaderLabels(["schedule", "micro-batches", "step (predicted)", "bubble", ""])
        self.what_if.verticalHeader().hide()
        self.what_if.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.what_if.horizontalHeader().setStretchLastSection(True)
        self.what_if.setMaximumHeight(180)
        layout.addWidget(self.what_if)
        self.show_predictions([])
        self.cells: list[tuple] = []
        self.labels: list[pg.TextItem] = []

    def show_plan(self, plan: list[list[str]] | None, devices: list[str], schedule: str | None) -> None:
        """Draw ``plan`` (per rank, tick by tick), or say there is none."""
        item = self.plot.getPlotItem()
        item.clear()
        self.labels = []
        self.cells = plan_cells(plan or [], devices)
        if not self.cells:
            self.caption.setText(EMPTY)
            return
        lanes = list(dict.fromkeys([*devices[:len(plan)], *(c[0] for c in self.cells)]))
        index = {device: i for i, device in enumerate(lanes)}
        for kind in dict.fromkeys(c[3] for c in self.cells):
            mine = [c for c in self.cells if c[3] == kind]
            item.addItem(pg.BarGraphItem(
                x0=np.array([c[1] for c in mine]), width=np.array([c[2] - c[1] for c in mine]) * 0.94,
                y0=np.array([index[c[0]] - LANE_HEIGHT / 2 for c in mine]), height=np.full(len(mine), LANE_HEIGHT),
                brush=palette.kind_color(kind), pen=None))
        # A device with several stages (interleaved, V-shaped) names the stage too, as torch writes it: "3F0".
        stages_on = {d: {c[4] for c in self.cells if c[0] == d} for d in lanes}
        for device, t0, t1, kind, stage, micro_batch in self.cells:
            text = (f"{stage if len(stages_on[device]) > 1 else ''}{LETTER[kind]}"
                    f"{'' if micro_batch is None else micro_batch}")
            label = pg.TextItem(text, color=DARK_TEXT if kind in LIGHT_KINDS else theme.FOREGROUND,
                                anchor=(0.5, 0.5))
            label.setPos((t0 + t1) / 2, index[device])
            label.setToolTip(f"{device}: stage {stage}, {kind}, micro-batch {micro_batch}")
            item.addItem(label)
            self.labels.append(label)
        item.getAxis("left").setTicks([[(i, d) for i, d in enumerate(lanes)]])
        ticks = max(len(actions) for actions in plan)
        item.setXRange(0, ticks, padding=0.01)
        item.setYRange(-0.5, len(lanes) - 0.5, padding=0.05)
        self.caption.setText(f"The {schedule or 'pipeline'} schedule's plan: torch.distributed.pipelining's own action "
                             f"list, {ticks} ticks. F forward, B backward, I/W input/weight gradient, with the "
                             "micro-batch; the Plots tab's timeline shows what the devices did.")

    def show_predictions(self, predictions: list, runnable: bool = True) -> None:
        """engine.what_if's predictions for the run in view, each row's button running it for real where
        ``runnable`` (the panel describes that run: a stored one's rows say how to get there instead)."""
        table = self.what_if
        table.setRowCount(len(predictions))
        for row, p in enumerate(predictions):
            cells = [p.schedule, str(p.micro_batches), f"{p.step_time_s * 1e3:.1f} ms", f"{100 * p.bubble:.0f}%"]
            for column, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                if p.measured:
                    item.setToolTip("this run's own schedule and micro-batches: the fit, measured")
                table.setItem(row, column, item)
            button = QtWidgets.QPushButton("measured" if p.measured else "Run")
            button.setEnabled(runnable and not p.measured)
            button.setToolTip(f"Run pipeline with {p.schedule} and {p.micro_batches} micro-batches for real" if runnable
                              else "A stored run's prediction: set its model, devices and batch in the panel, "
                                   f"then {p.schedule} with {p.micro_batches} micro-batches, to run it")
            button.clicked.connect(lambda _=False, s=p.schedule, m=p.micro_batches: self.sigRunPrediction.emit(s, m))
            table.setCellWidget(row, 4, button)
        self.what_if.setVisible(bool(predictions))
        self.what_if_caption.setText(f"What-if: {TRUST}" if predictions else "")
