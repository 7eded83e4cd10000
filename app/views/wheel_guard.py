"""guard_wheel: a form's number boxes and lists take the mouse wheel only once focused (clicked or tabbed to).

A wheel turned to scroll the form changed whatever box passed under the cursor: Stages per device went from 2 to 1
and the run was refused; on Steps or Batch size it changed silently. The usual fix: Qt.StrongFocus (the wheel
gives no focus) and a filter that passes an unfocused box's wheel to its parent, the scrolling form.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

WHEELED = (QtWidgets.QAbstractSpinBox, QtWidgets.QComboBox)


class WheelGuard(QtCore.QObject):
    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802  (Qt naming)
        if event.type() == QtCore.QEvent.Type.Wheel and isinstance(watched, QtWidgets.QWidget) \
                and not watched.hasFocus():
            event.ignore()   # not the box's: Qt hands an ignored wheel on to its parent (the form scrolls)
            return True
        return False


def guard_wheel(root: QtWidgets.QWidget) -> WheelGuard:
    """Every spin box and combo box under ``root``, now: focused by a click or Tab only, the wheel theirs only
    while they have the focus. Returns the filter (``root`` owns it)."""
    guard = WheelGuard(root)
    for box in root.findChildren(QtWidgets.QWidget):
        if isinstance(box, WHEELED):
            box.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
            box.installEventFilter(guard)
    return guard
