"""MoreOptions: the options the experiment panel has no control of its own for, built from their declaration.

ExperimentConfig declares each option once (engine/config.py ``_option``); those marked for the form
(``Option.in_form``: the seed, the learning rate, the DataLoader's options, the hang timeout, the profiled steps,
the timeline, the MFU's peak, and any option declared so later) each get a control here by their type: a list
for a choice among names, a number box for a whole number, a text box for the rest, empty meaning the engine's
default; each concern's options together under its name (``OPTION_GROUPS``), as `run --help` groups them.
Folded under a toggle: the panel's own rows are what most runs change.
"""
from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.views.tips import add_described, wrapped
from engine.config import OPTION_GROUPS
from engine.run_options import Option, by_concern


class MoreOptions(QtWidgets.QWidget):
    sigChanged = QtCore.Signal()

    def __init__(self, options: list[Option], parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        options = by_concern(options)   # each concern's together, under its name, as the command line's help
        self.options = {o.name: o for o in options}
        self.toggle = QtWidgets.QToolButton()
        self.toggle.setObjectName("moreOptionsToggle")
        self.toggle.setText("More options")
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(QtCore.Qt.ArrowType.RightArrow)
        self.toggle.toggled.connect(self._fold)
        self.body = QtWidgets.QWidget()
        form = QtWidgets.QFormLayout(self.body)
        form.setContentsMargins(12, 0, 0, 0)
        self.controls: dict[str, QtWidgets.QWidget] = {}
        self.headers: dict[str, QtWidgets.QLabel] = {}
        for o in options:
            if o.group not in self.headers:
                header = self.headers[o.group] = QtWidgets.QLabel(o.group.capitalize())
                header.setObjectName("sectionTitle")
                header.setToolTip(wrapped(OPTION_GROUPS[o.group]))
                form.addRow(header)
            control = self._control(o)
            control.setObjectName(f"option_{o.name}")
            control.setToolTip(wrapped(f"{o.help} ({o.flag})"))
            self.controls[o.name] = control
            form.addRow(o.label, control)
        self.body.hide()
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.toggle)
        layout.addWidget(self.body)
        for name, o in self.options.items():
            self.set_value(name, o.default)

    def _fold(self, shown: bool) -> None:
        self.body.setVisible(shown)
        self.toggle.setArrowType(QtCore.Qt.ArrowType.DownArrow if shown else QtCore.Qt.ArrowType.RightArrow)

    def _control(self, o: Option) -> QtWidgets.QWidget:
        if o.choices:
            combo = QtWidgets.QComboBox()
            for name, description in o.choices.items():
                add_described(combo, name, name, description)
            combo.currentIndexChanged.connect(self.sigChanged)
            return combo
        if o.type is bool:
            check = QtWidgets.QCheckBox()
            check.toggled.connect(self.sigChanged)
            return check
        if o.type is int:
            # Within the option's declared bounds (engine/config.py), else any value the command line takes (a
            # seed may be negative); one below the least, where the option may be left open, is "default".
            least, most = o.bounds or (-2 ** 31 + 1, 2 ** 31 - 1)
            spin = QtWidgets.QSpinBox(minimum=int(least) - 1 if o.optional else int(least), maximum=int(most))
            if o.optional:
                spin.setSpecialValueText("default")
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(self.sigChanged)
            return spin
        edit = QtWidgets.QLineEdit()
        edit.setPlaceholderText("default" if o.optional else str(o.default))
        if o.type is float:
            validator = QtGui.QDoubleValidator(edit)
            validator.setLocale(QtCore.QLocale.c())   # "0.05" as float() reads it, whatever the system's locale
            edit.setValidator(validator)
        edit.editingFinished.connect(self.sigChanged)
        return edit

    @property
    def names(self) -> list[str]:
        return list(self.options)

    def value(self, name: str) -> Any:
        """The option's value as the config takes it: None (or its default) where the control is left empty."""
        o, control = self.options[name], self.controls[name]
        if isinstance(control, QtWidgets.QComboBox):
            return control.currentData()
        if isinstance(control, QtWidgets.QCheckBox):
            return control.isChecked()
        if isinstance(control, QtWidgets.QSpinBox):
            return None if o.optional and control.value() == control.minimum() else control.value()
        text = control.text().strip()
        if not text:
            return None if o.optional else o.default
        if o.type is float:
            try:
                return float(text)
            except ValueError:   # a number half typed ("1e"): the default until it is one
                return None if o.optional else o.default
        return text

    def values(self) -> dict[str, Any]:
        return {name: self.value(name) for name in self.options}

    def set_value(self, name: str, value: Any) -> None:
        control = self.controls[name]
        if isinstance(control, QtWidgets.QComboBox):
            control.setCurrentIndex(max(0, control.findData(value)))
        elif isinstance(control, QtWidgets.QCheckBox):
            control.setChecked(bool(value))
        elif isinstance(control, QtWidgets.QSpinBox):
            control.setValue(control.minimum() if value is None else int(value))
        else:
            control.setText("" if value is None else f"{value:g}" if isinstance(value, float) else str(value))
