"""BatchHint: the model's own batch size beside the batch box, offered with a click.

Switching models keeps the user's batch size (nothing changes behind their back); the
model's suggestion, and where it comes from, shows under the box with a button that
applies it. A model file suggests nothing.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from engine.models import ModelInfo


class BatchHint(QtWidgets.QWidget):
    sigUse = QtCore.Signal(int)   # the suggested batch size, clicked

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self._suggested: int | None = None
        self.label = QtWidgets.QLabel()
        self.label.setObjectName("muted")
        self.label.setWordWrap(True)   # a long origin must not widen the panel past its pane
        self.button = QtWidgets.QPushButton()
        self.button.setObjectName("useSuggestedBatch")
        self.button.clicked.connect(lambda: self._suggested is not None and self.sigUse.emit(self._suggested))
        retain = self.button.sizePolicy()
        retain.setRetainSizeWhenHidden(True)   # the row keeps its height with or without the button
        self.button.setSizePolicy(retain)
        row = QtWidgets.QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        row.addWidget(self.button)

    def show_for(self, info: ModelInfo | None, batch: int) -> None:
        """The suggestion of the model ``info`` (None: a model file), beside the batch size ``batch`` chosen."""
        self._suggested = info.batch_size if info else None
        if info is None:
            self.label.setText("")
            self.button.hide()
        elif batch == info.batch_size:
            self.label.setText(f"the suggested batch size ({info.batch_origin})")
            self.button.hide()
        else:
            self.label.setText(f"suggested: {info.batch_size} ({info.batch_origin})")
            self.button.setText(f"Use {info.batch_size}")
            self.button.show()
