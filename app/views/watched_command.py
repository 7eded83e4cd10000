"""WatchedCommand: in the Experiment panel's place while a watched script runs, the command being watched, read
only: the script (or module), its arguments, how it was started, where, and on which devices. The form describes
the engine's own runs; shown during a watched one, it read as if mlp were training."""
from __future__ import annotations

import shlex

from PySide6 import QtCore, QtWidgets

from app.views.wrapped_label import WrappedLabel
from engine.config import ExperimentConfig

NOTE = ("Watching a script (Run › Watch a script…): the run is the script's own. The form comes back when it "
        "ends.")


def command_rows(config: ExperimentConfig) -> list[tuple[str, str]]:
    """(label, value) rows of a watched script's command, as the watch dialog took them."""
    started = f"python -m {config.script_module}" if config.script_module else \
        f"{config.script_launch} {shlex.quote(config.script or '')}"
    return [("Command", " ".join(filter(None, [started, config.script_args or ""]))),
            ("Script", config.script_module or config.script or "—"),
            ("Arguments", config.script_args or "none"),
            ("Devices", config.devices),
            ("Started as", config.script_launch),
            ("Folder", config.script_cwd or "the script's own")]


class WatchedCommand(QtWidgets.QFrame):
    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("watchedCommand")
        self.form = QtWidgets.QFormLayout(self)
        self.form.setContentsMargins(0, 0, 0, 0)
        self.form.setLabelAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignTop)
        self.values: dict[str, QtWidgets.QLabel] = {}
        self.hide()

    def show_command(self, config: ExperimentConfig | None) -> None:
        """The watched run's command (None: hidden, the form is back)."""
        if config is None:
            self.hide()
            return
        while self.form.rowCount():
            self.form.removeRow(0)   # and its widgets
        note = WrappedLabel(NOTE)
        note.setObjectName("muted")
        self.form.addRow(note)
        self.values = {}
        for label, value in command_rows(config):
            shown = WrappedLabel(value)
            shown.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
            shown.setObjectName("watchedValue")
            self.values[label] = shown
            self.form.addRow(label, shown)
        self.show()
