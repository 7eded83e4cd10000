"""LogView: the Log tab; each line time-stamped, warnings and errors in the theme's colours."""
from __future__ import annotations

import html
import time

from PySide6 import QtWidgets

from app.views import theme

LEVEL_COLORS = {"warning": theme.WARNING, "error": theme.ERROR}
MAX_LINES = 5000


class LogView(QtWidgets.QPlainTextEdit):
    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("logView")
        self.setReadOnly(True)
        self.setMaximumBlockCount(MAX_LINES)

    def add(self, text: str, level: str = "info") -> None:
        """One entry ("info", "warning" or "error"); a multi-line one (a traceback) keeps its lines."""
        line = f"{time.strftime('%H:%M:%S')}  {text}"
        color = LEVEL_COLORS.get(level)
        if color is None:
            self.appendPlainText(line)
        else:
            body = html.escape(line).replace("\n", "<br>")
            self.appendHtml(f"<span style='color:{color}; white-space:pre-wrap'>{body}</span>")

    def level_color(self, line_index: int) -> str | None:
        """The colour the ``line_index``-th entry is drawn in ("#rrggbb"), None for the default."""
        block = self.document().findBlockByNumber(line_index)
        fmt = block.begin().fragment().charFormat() if block.isValid() else None
        if fmt is None or not fmt.hasProperty(fmt.Property.ForegroundBrush):
            return None
        return fmt.foreground().color().name()
