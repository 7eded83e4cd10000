"""The history's tables: rows one line high, and where a refresh or a selection leaves the scroll."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets


def one_line_rows(table: QtWidgets.QTableWidget) -> None:
    """Rows one line of text high, never wrapped: the tab shows as many runs as its height holds."""
    table.setWordWrap(False)
    table.setTextElideMode(QtCore.Qt.TextElideMode.ElideRight)
    rows = table.verticalHeader()
    rows.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Fixed)
    rows.setMinimumSectionSize(1)
    rows.setDefaultSectionSize(table.fontMetrics().height() + 6)


def show_selection_or_top(table: QtWidgets.QTableWidget) -> None:
    """After a refresh or a selection made for the user: the first selected row in view, else the newest
    (the top) from the first column, wherever the table was scrolled to before."""
    table.horizontalScrollBar().setValue(0)
    rows = sorted(index.row() for index in table.selectionModel().selectedRows())
    if rows:
        table.scrollTo(table.model().index(rows[0], 0), QtWidgets.QAbstractItemView.ScrollHint.EnsureVisible)
    else:
        table.scrollToTop()
