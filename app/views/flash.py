"""flash: a widget outlined for a moment, to say "here" (a finding's "why" points at the figure it comes from)."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.views import theme

FLASH_MS = 1500


def flash(widget: QtWidgets.QWidget) -> QtWidgets.QFrame:
    """Outline ``widget`` for FLASH_MS: a frame laid over it that lets the mouse through, then goes."""
    frame = QtWidgets.QFrame(widget)
    frame.setObjectName("flash")
    frame.setAttribute(QtCore.Qt.WidgetAttribute.WA_TransparentForMouseEvents)
    frame.setStyleSheet(f"QFrame#flash {{ border: 2px solid {theme.WARNING}; border-radius: 4px; "
                        "background: transparent; }")
    frame.setGeometry(widget.rect())
    frame.show()
    frame.raise_()
    QtCore.QTimer.singleShot(FLASH_MS, frame.deleteLater)
    return frame
