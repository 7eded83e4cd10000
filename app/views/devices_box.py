"""DevicesBox: the Devices choice, worded as the devices a run will have, holding the spec the config takes.

Each choice reads "2 CPU devices (cpu:0, cpu:1)" (app/state/device_words.py) and holds
"cpu:2"; a spec can still be typed ("cuda:0,cuda:2"). ``spec()`` is what the config
gets; setting a spec that is one of the choices selects that choice, so the box then
says what it means.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.state.device_words import DeviceChoice
from app.views.tips import add_described


class DevicesBox(QtWidgets.QComboBox):
    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("devicesCombo")
        self.setEditable(True)
        self.setInsertPolicy(QtWidgets.QComboBox.InsertPolicy.NoInsert)
        self.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(12)
        self.setToolTip('A choice, or a spec typed as the command line takes it: "cpu:N" (N CPU virtual devices '
                        'named cpu:0 .. cpu:N-1), "cuda:0,cuda:1", "cpu,cuda:0" or "auto"')
        self.lineEdit().editingFinished.connect(self._typed)

    def set_choices(self, choices: list[DeviceChoice]) -> None:
        """Offer ``choices``; the spec in the box stays."""
        current = self.spec()
        blocked = self.blockSignals(True)
        try:
            self.clear()
            for choice in choices:
                add_described(self, choice.text, choice.spec, choice.tip)
        finally:
            self.blockSignals(blocked)
        self.set_spec(current or "auto")

    def spec(self) -> str:
        """The devices spec for the config: the chosen choice's, or what was typed."""
        text = self.currentText().strip()
        index = self.findText(text, QtCore.Qt.MatchFlag.MatchExactly)
        return self.itemData(index) if index >= 0 else text

    def set_spec(self, spec: str) -> None:
        index = self.findData(spec.strip())
        if index >= 0:
            self.setCurrentIndex(index)
            self.setEditText(self.itemText(index))  # the index may be current already, under a typed spec
        else:
            self.setEditText(spec)
        self.lineEdit().setCursorPosition(0)        # the count and first names in view, not the text's end

    def setCurrentText(self, text: str) -> None:  # noqa: N802  (Qt naming)
        """As ``set_spec``: a spec of one of the choices selects it (the window's tests and settings set specs)."""
        self.set_spec(text)

    def _typed(self) -> None:
        """A typed spec that is one of the choices becomes that choice."""
        if self.findData(self.currentText().strip()) >= 0:
            self.set_spec(self.currentText())
