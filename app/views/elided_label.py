"""ElidedLabel: one line of changing text that never widens the window.

A plain QLabel asks for its whole text's width as its minimum, so a long
status ("Running pipeline on cuda:0, cuda:1, cuda:2, ... · bubble 30%") or a
long database path would raise the main window's minimum width past a laptop
screen. This label asks for nothing and cuts its text with "…" where it ends;
the whole text is in its tooltip.
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets


class ElidedLabel(QtWidgets.QLabel):
    def __init__(self, text: str = "", parent: QtWidgets.QWidget | None = None,
                 mode: QtCore.Qt.TextElideMode = QtCore.Qt.TextElideMode.ElideRight):
        """``mode``: where the text is cut (ElideMiddle for a line ending in a path: its file's name stays)."""
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802  (Qt naming)
        self._full = text
        self.setToolTip(text if text else "")
        self._elide()

    def text(self) -> str:
        return self._full

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802
        return QtCore.QSize(0, super().minimumSizeHint().height())

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, self._mode, max(self.width(), 1))
        super().setText(shown)
