"""ErrorPanel: a failed run's message and traceback, above the plots; dismissable; at most one action."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.state.error_text import readable


class ErrorPanel(QtWidgets.QFrame):
    """A failed run's message and traceback, above the plots; dismissable. A problem the user can act on
    (a damaged store's runs to recover) has one button for it, whose click is ``sigAction``."""
    sigAction = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("errorPanel")
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        top = QtWidgets.QHBoxLayout()
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("errorMessage")
        self.message.setWordWrap(True)
        # Plain text: a message quoting code ("<lambda>", "a < b") is not markup.
        self.message.setTextFormat(QtCore.Qt.TextFormat.PlainText)
        self.message.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        top.addWidget(self.message, 1)
        self.action_button = QtWidgets.QPushButton()
        self.action_button.clicked.connect(self.sigAction)
        self.action_button.hide()
        top.addWidget(self.action_button)
        self.details_button = QtWidgets.QPushButton("Traceback")
        self.details_button.setCheckable(True)
        top.addWidget(self.details_button)
        self.dismiss_button = QtWidgets.QPushButton("Dismiss")
        self.dismiss_button.clicked.connect(self.hide)
        top.addWidget(self.dismiss_button)
        layout.addLayout(top)
        self.traceback = QtWidgets.QPlainTextEdit()
        self.traceback.setObjectName("traceback")
        self.traceback.setReadOnly(True)
        self.traceback.setMaximumHeight(180)
        self.traceback.hide()
        self.details_button.toggled.connect(self.traceback.setVisible)
        layout.addWidget(self.traceback)
        self.hide()

    def show_error(self, message: str, tb: str | None, action: str | None = None, details: str = "") -> None:
        """``action``: the text of a button whose click is sigAction (None: no button); ``details``: the whole
        story behind a one-line ``message``, shown on request (a traceback is shown at once)."""
        # The header is read, the traceback is evidence: only the header loses repr()'s escapes.
        self.message.setText(readable(message))
        self.message.setToolTip(details)
        self.traceback.setPlainText(details or tb or "(no traceback: the process ended without one)")
        self.details_button.setText("Details" if details else "Traceback")
        self.details_button.setChecked(bool(tb) and not details)
        self.details_button.setVisible(bool(tb or details) or action is None)
        self.action_button.setText(action or "")
        self.action_button.setVisible(action is not None)
        self.action_button.setEnabled(True)
        self.show()

    def set_action_enabled(self, enabled: bool) -> None:
        """The action's button, greyed while what it started goes."""
        self.action_button.setEnabled(enabled)
