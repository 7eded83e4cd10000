"""NoticeArea: a form's problems, the buttons that mend them, and a warning, in a box of fixed height.

(``FixButtons``, a problem's buttons, serves the split view too.)

A problem that appears under the control it concerns pushes every control below
it down, under the cursor of whoever just changed one. This box sits below the
form and keeps its height whatever it shows (it scrolls when it holds more), so
nothing above or below it moves when a problem comes or goes.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.state.problem_help import Fix, Help


class FixButtons(QtWidgets.QWidget):
    """A button per fix (problem_help.Fix: its words, the options it sets), two to a row so a narrow side panel
    does not widen."""
    sigChosen = QtCore.Signal(dict)   # the chosen fix's changes

    COLUMNS = 2

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.grid = QtWidgets.QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setColumnStretch(self.COLUMNS, 1)   # buttons at their own width, on the left
        self.buttons: list[QtWidgets.QPushButton] = []
        self.hide()

    def set_fixes(self, fixes: list[Fix]) -> None:
        for button in self.buttons:
            self.grid.removeWidget(button)
            button.deleteLater()
        self.buttons = []
        for k, fix in enumerate(fixes):
            button = QtWidgets.QPushButton(fix.label)
            button.setObjectName("fixButton")
            button.clicked.connect(lambda _checked=False, changes=fix.changes: self.sigChosen.emit(dict(changes)))
            self.grid.addWidget(button, k // self.COLUMNS, k % self.COLUMNS)
            self.buttons.append(button)
        self.setVisible(bool(self.buttons))


def _problem_label() -> QtWidgets.QLabel:
    label = QtWidgets.QLabel()
    label.setObjectName("problem")
    label.setWordWrap(True)
    label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
    label.hide()
    return label


class NoticeArea(QtWidgets.QScrollArea):
    sigFixChosen = QtCore.Signal(dict)   # a fix's changes: config fields and their new values

    def __init__(self, keys: tuple[str, ...], lines: int = 5, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("notices")
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body)
        layout.setContentsMargins(0, 0, 4, 0)
        layout.setSpacing(2)
        self.labels: dict[str, QtWidgets.QLabel] = {}
        self._fixes: dict[str, FixButtons] = {}
        for key in keys:
            self.labels[key] = _problem_label()
            self._fixes[key] = FixButtons()
            self._fixes[key].sigChosen.connect(self.sigFixChosen)
            layout.addWidget(self.labels[key])
            layout.addWidget(self._fixes[key])
        self.warning = QtWidgets.QLabel()
        self.warning.setObjectName("warning")
        self.warning.setWordWrap(True)
        self.warning.hide()
        layout.addWidget(self.warning)
        self.all_clear = QtWidgets.QLabel("No problems with these settings.")
        self.all_clear.setObjectName("muted")
        layout.addWidget(self.all_clear)
        layout.addStretch(1)
        self.setWidget(body)
        self.setWidgetResizable(True)
        self.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        button_h = QtWidgets.QPushButton("Use").sizeHint().height()
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + button_h + 8)

    def show_problems(self, by_key: dict[str, list[Help]]) -> None:
        """Each key's problems under one another, in the app's words, a button per fix."""
        for key, label in self.labels.items():
            problems = by_key.get(key) or []
            label.setText("\n".join(p.text for p in problems))
            label.setVisible(bool(problems))
            self._fixes[key].set_fixes([f for p in problems for f in p.fixes])
        self._show_all_clear()

    def show_warning(self, text: str | None) -> None:
        self.warning.setText(text or "")
        self.warning.setVisible(bool(text))
        self._show_all_clear()

    def _show_all_clear(self) -> None:
        self.all_clear.setVisible(not self.warning.text() and not any(label.text() for label in self.labels.values()))
