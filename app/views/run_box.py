"""RunBox: Run and Stop, why Run is held back, and the progress of the run or experiment.

It stays in view below the scrolling experiment settings. The buttons show the
window's Run and Stop actions (app/actions.py), so their shortcuts, menu entries and
buttons are enabled together.
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets


class RunBox(QtWidgets.QFrame):
    def __init__(self, run_action: QtGui.QAction, stop_action: QtGui.QAction,
                 parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runBox")
        self.run_button = self._button("runButton", run_action)
        self.stop_button = self._button("stopButton", stop_action)
        self.reason = QtWidgets.QLabel()
        self.reason.setObjectName("runReason")
        self.reason.setWordWrap(True)
        self.progress_bar = QtWidgets.QProgressBar()
        self.progress_bar.setObjectName("progressBar")
        self.progress_bar.setFormat("no run yet")
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.time_left = QtWidgets.QLabel("")
        self.time_left.setObjectName("muted")

        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 10)
        layout.setSpacing(6)
        self._buttons = QtWidgets.QHBoxLayout()
        self._buttons.addWidget(self.run_button, 1)
        self._buttons.addWidget(self.stop_button, 1)
        layout.addLayout(self._buttons)
        layout.addWidget(self.reason)
        progress = QtWidgets.QHBoxLayout()
        progress.addWidget(self.progress_bar, 1)
        progress.addWidget(self.time_left)
        layout.addLayout(progress)

    def add_beside_run(self, action: QtGui.QAction, name: str) -> QtWidgets.QToolButton:
        """Another of the window's actions as a button right of Run (Advise), enabled with its action."""
        button = self._button(name, action)
        self._buttons.insertWidget(1, button, 1)
        return button

    @staticmethod
    def _button(name: str, action: QtGui.QAction) -> QtWidgets.QToolButton:
        button = QtWidgets.QToolButton()
        button.setObjectName(name)
        button.setDefaultAction(action)
        button.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        return button

    def show_reason(self, text: str, blocked: bool) -> None:
        """The line under Run: ready, or why not (``blocked`` draws it in the style sheet's warning colour)."""
        self.reason.setText(text)
        self.reason.setProperty("blocked", blocked)
        self.reason.style().unpolish(self.reason)
        self.reason.style().polish(self.reason)

    def show_progress(self, value: int, maximum: int, text: str) -> None:
        """``value`` of ``maximum`` (0: busy, no count yet), labelled ``text`` ("%v" and "%m" are Qt's)."""
        self.progress_bar.setRange(0, maximum)
        self.progress_bar.setValue(value)
        self.progress_bar.setFormat(text)

    def end_progress(self, text: str | None, complete: bool) -> None:
        """The work ended: the bar full when it completed; ``text`` replaces the label (None keeps it)."""
        if self.progress_bar.maximum() == 0:   # a busy bar (a watched script's open end) stops moving
            self.progress_bar.setRange(0, 1)
            self.progress_bar.setValue(0)
        if complete:
            self.progress_bar.setValue(self.progress_bar.maximum())
        if text is not None:
            self.progress_bar.setFormat(text)

    def show_time_left(self, text: str) -> None:
        self.time_left.setText(text)
