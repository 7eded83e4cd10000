"""AdviseView: the Advise tab, every candidate advise found for the form's model and devices, ranked, in the
what-if table's style (predicted, measured, the error), the choice, the runner-up and those tied with it named,
each row's "Use this" filling the form with it; above it the choice and what advise did, below it why and how far
to trust it. The rows' words are app/state/advise_rows.py's.
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app.state.advise_rows import COLUMNS, TIPS, AdviseRow
from app.views.table_rows import one_line_rows

EMPTY = ("Advise finds the best way to spread the form's model over its devices: every strategy, schedule, "
         "micro-batch count and split predicted from one probe of the model and the devices, the best few checked "
         "by short runs. Click Advise beside Run (as main.py advise; docs/advise.md).")
WHY_COLUMN, BUTTON_COLUMN = COLUMNS.index("why"), len(COLUMNS) - 1


class AdviseView(QtWidgets.QWidget):
    sigUse = QtCore.Signal(int)   # the index of the row whose "Use this" was clicked

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.caption = QtWidgets.QLabel(EMPTY)
        self.caption.setObjectName("adviseCaption")
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.caption)
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("adviseTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        for column, tip in enumerate(TIPS):
            self.table.horizontalHeaderItem(column).setToolTip(tip)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        one_line_rows(self.table)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        # The reasons are long: they take the room left, cut, whole in their tooltips.
        header.setSectionResizeMode(WHY_COLUMN, QtWidgets.QHeaderView.ResizeMode.Stretch)
        layout.addWidget(self.table, 1)
        self.details = QtWidgets.QLabel("")
        self.details.setObjectName("muted")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.details)
        self.rows: list[AdviseRow] = []
        self.buttons: list[QtWidgets.QPushButton] = []
        self.table.hide()

    def show_status(self, text: str, clear: bool = False) -> None:
        """What advise is doing, or why it gave no answer, in the caption; ``clear``: the last answer's rows go."""
        self.caption.setText(text)
        if clear:
            self.show_rows([], text, "")

    def show_rows(self, rows: list[AdviseRow], caption: str, details: str, usable: bool = True) -> None:
        """The candidates, ranked; ``details``: why the choice, and the notes; ``usable``: "Use this" may be
        clicked now (not while something runs)."""
        self.rows = list(rows)
        self.caption.setText(caption)
        self.details.setText(details)
        table = self.table
        table.setRowCount(len(rows))
        self.buttons = []
        bold = QtGui.QFont(table.font())
        bold.setBold(True)
        for index, row in enumerate(rows):
            for column, text in enumerate(row.cells):
                item = QtWidgets.QTableWidgetItem(text)
                if column in row.tips:
                    item.setToolTip(row.tips[column])
                if row.role == "choice":
                    item.setFont(bold)
                table.setItem(index, column, item)
            button = QtWidgets.QPushButton("Use this")
            button.setToolTip(f"Fill the form with {row.entry.label}" if row.fits
                              else f"{row.entry.label} does not fit the memory limit")
            button.clicked.connect(lambda _=False, i=index: self.sigUse.emit(i))
            table.setCellWidget(index, BUTTON_COLUMN, button)
            self.buttons.append(button)
        self.set_usable(usable)
        table.setVisible(bool(rows))
        choice = next((i for i, row in enumerate(rows) if row.role == "choice"), None)
        if choice is not None:
            table.scrollToItem(table.item(choice, 0))

    def set_usable(self, usable: bool) -> None:
        """Whether the rows' "Use this" may be clicked: never while something runs, never for a row that does
        not fit memory."""
        for row, button in zip(self.rows, self.buttons, strict=True):
            button.setEnabled(usable and row.fits)
