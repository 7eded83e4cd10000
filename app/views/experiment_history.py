"""ExperimentTable: the stored experiments, newest first; selecting one shows its result.

An experiment that never finished (the app was closed or killed mid-way) has
no stored result; its row still shows what its finished runs give, as the
export does (engine.experiments.stored_result rebuilds it from the runs).
"""
from __future__ import annotations

import time

from PySide6 import QtCore, QtGui, QtWidgets

from app.views import theme
from app.views.table_rows import show_selection_or_top
from engine.experiments import preset_title, stored_result
from engine.results import ExperimentResult
from engine.store import ExperimentRecord, Store

COLUMNS = ("created", "experiment", "status", "points", "runs", "best", "id")


def row_values(experiment: ExperimentRecord, result: ExperimentResult, runs: int) -> list[str]:
    return [
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(experiment.created)),
        preset_title(experiment.name),
        result.status,
        str(len(result.points)),
        str(runs),
        str(result.winner or ("tied" if result.tied else "—")),
        experiment.id,
    ]


class ExperimentTable(QtWidgets.QTableWidget):
    sigExperimentSelected = QtCore.Signal(str)   # experiment id

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("experimentHistoryTable")
        self.setHorizontalHeaderLabels(COLUMNS)
        self.verticalHeader().setVisible(False)
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.ids: list[str] = []
        self.names: dict[str, str] = {}
        self.running_id: str | None = None   # shown as "running" rather than "incomplete"
        self.itemSelectionChanged.connect(self._on_selection)

    def refresh(self, store: Store, run_counts: dict[str, int]) -> None:
        selected = self.selected_id()
        experiments = store.list_experiments()
        self.ids = [e.id for e in experiments]
        self.names = {e.id: e.name for e in experiments}
        colors = {"finished": theme.OK, "stopped": theme.WARNING, "incomplete": theme.WARNING,
                  "running": theme.FOREGROUND}
        self.blockSignals(True)
        try:
            self.setRowCount(len(experiments))
            for r, experiment in enumerate(experiments):
                result = stored_result(store, experiment)
                values = row_values(experiment, result, run_counts.get(experiment.id, 0))
                if experiment.id == self.running_id and experiment.result is None:
                    values[2] = "running"
                for c, text in enumerate(values):
                    item = QtWidgets.QTableWidgetItem(text)
                    if c == 0:
                        item.setData(QtCore.Qt.ItemDataRole.UserRole, experiment.id)
                    if c == 2:
                        item.setForeground(QtGui.QColor(colors.get(text, theme.FOREGROUND)))
                    self.setItem(r, c, item)
            if selected in self.ids:
                self.selectRow(self.ids.index(selected))
        finally:
            self.blockSignals(False)
        show_selection_or_top(self)

    def selected_id(self) -> str | None:
        rows = self.selectionModel().selectedRows() if self.selectionModel() else []
        if not rows:
            return None
        item = self.item(rows[0].row(), 0)
        return item.data(QtCore.Qt.ItemDataRole.UserRole) if item is not None else None

    def select_id(self, experiment_id: str) -> None:
        if experiment_id in self.ids:
            self.selectRow(self.ids.index(experiment_id))
            show_selection_or_top(self)

    def _on_selection(self) -> None:
        selected = self.selected_id()
        if selected:
            self.sigExperimentSelected.emit(selected)
