"""WrappedLabel: a word-wrapped label that is always as tall as its wrapped lines.

A word-wrapped QLabel in a QFormLayout inside a scroll area was given the height its text wrapped to at another
width: a strategy's or a schedule's description lost its first and last lines (Interleaved 1F1B, FSDP at
1280x800). This one asks, at every width it gets and for every text, for the height its lines need.
"""
from __future__ import annotations

from PySide6 import QtWidgets


class WrappedLabel(QtWidgets.QLabel):
    def __init__(self, text: str = "", parent: QtWidgets.QWidget | None = None):
        super().__init__(text, parent)
        self.setWordWrap(True)

    def setText(self, text: str) -> None:  # noqa: N802  (Qt naming)
        super().setText(text)
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        width = self.contentsRect().width()
        need = max(0, self.heightForWidth(width)) if width > 0 and self.text() else 0
        if need != self.minimumHeight():
            self.setMinimumHeight(need)
