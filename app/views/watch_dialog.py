"""Run › Watch a script…: the user's own training script, its arguments, the devices, the nodes (agents started
with ``--allow-scripts``) and how many steps to watch, as ``main.py watch`` takes them; the config it makes is ``--strategy script``'s
(engine/strategies/script.py), checked by the engine's torch-free rules as it is typed, so Watch is
enabled only for a config that can launch and a problem names its field."""
from __future__ import annotations

import os
import shlex

from PySide6 import QtWidgets

from app.views import theme
from app.views.nodes_row import NodesRow
from engine import devices as devices_mod
from engine.config import ExperimentConfig
from engine.environment import ROOT
from engine.rules import problems
from engine.strategies import STRATEGIES
from engine.strategies.script import DEFAULT_DEVICES, script_config

FIELD_OF = {"script": "script", "script_args": "arguments", "script_cwd": "script", "devices": "devices",
            "steps": "steps", "nodes": "nodes", "token_file": "nodes"}


class WatchDialog(QtWidgets.QDialog):
    def __init__(self, parent=None, script: str = "", args: str = "", devices: str = DEFAULT_DEVICES,
                 nodes: str | None = None, token_file: str | None = None):
        super().__init__(parent)
        self.setWindowTitle("Watch a script")
        self.setMinimumWidth(560)
        self.script = QtWidgets.QLineEdit(script)
        self.script.setPlaceholderText("train.py: your script, as you would give it to torchrun")
        browse = QtWidgets.QPushButton("Browse…")
        browse.clicked.connect(self.browse)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.script, 1)
        row.addWidget(browse)
        self.args = QtWidgets.QLineEdit(args)
        self.args.setPlaceholderText("--epochs 1 --batch-size 64 (its own arguments, as on a command line)")
        self.devices = QtWidgets.QLineEdit(devices)
        self.devices.setToolTip('"cpu:N": one rank per CPU virtual device, each pinned to a core of its own; '
                                '"cuda:0,cuda:1,...": one rank per GPU, rank k on cuda:k (its LOCAL_RANK)')
        self.nodes = NodesRow()
        self.nodes.set_nodes(nodes)
        self.nodes.set_token_file(token_file)
        self.nodes.edit.setToolTip("Blank: this machine. Or the agents of other machines (`python main.py node "
                                   "--listen ADDR:PORT --allow-scripts` on each): the script travels to every "
                                   "node and runs there, on the devices above; ranks go node by node.")
        self.steps = QtWidgets.QSpinBox()
        self.steps.setRange(0, 10_000_000)
        self.steps.setSpecialValueText("until the script ends")
        self.steps.setToolTip("Stop the script after this many optimizer steps")
        form = QtWidgets.QFormLayout()
        form.addRow("Script", row)
        form.addRow("Arguments", self.args)
        form.addRow("Devices", self.devices)
        form.addRow("Nodes", self.nodes)
        form.addRow("Stop after steps", self.steps)
        self.problem = QtWidgets.QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet(f"color: {theme.ERROR};")
        note = QtWidgets.QLabel("The script runs unmodified, one rank per device with torchrun's variables (with "
                                "Nodes, its text travels to every node's agent, which must allow scripts); its "
                                "output goes to the Log tab and the run to the history.")
        note.setWordWrap(True)
        self.buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.watch_button = self.buttons.addButton("Watch", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)
        for edit in (self.script, self.args, self.devices):
            edit.textChanged.connect(self.check)
        self.steps.valueChanged.connect(self.check)
        self.nodes.sigChanged.connect(self.check)
        self.nodes.edit.textChanged.connect(self.check)
        self.check()

    def browse(self) -> None:
        current = self.script.text().strip()
        start = os.path.dirname(current) if current else str(ROOT / "examples")
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Watch a script", start,
                                                        "Python script (*.py);;All files (*)")
        if path:
            self.script.setText(path)

    def config(self) -> ExperimentConfig:
        """The run the fields describe, in the script's own folder (raises ValueError for arguments a shell could
        not split)."""
        script = self.script.text().strip()
        config = script_config(script, shlex.split(self.args.text()),
                               devices=self.devices.text().strip() or DEFAULT_DEVICES, steps=self.steps.value(),
                               cwd=os.path.dirname(os.path.abspath(script)) if script else None)
        return config.replace(nodes=self.nodes.nodes(), token_file=self.nodes.token_file())

    def fields(self) -> dict[str, str | None]:
        """What the dialog opens with next time (its constructor's arguments)."""
        return dict(script=self.script.text(), args=self.args.text(), devices=self.devices.text(),
                    nodes=self.nodes.nodes(), token_file=self.nodes.chosen_token_file())

    def problems(self) -> list[str]:
        try:
            config = self.config()
        except ValueError as exc:   # shlex: an unclosed quote
            return [f"arguments: {exc}"]
        found = [f"{FIELD_OF.get(p.option, p.option)}: {p.message}" for p in problems(config)]
        if config.nodes:   # the devices are each node's: their agents check them when Watch starts
            return found
        try:
            placed = devices_mod.parse(config.devices, 2, gpus=0)
        except devices_mod.DeviceError as exc:
            return found + [f"devices: {exc}"]
        return found + [f"devices: {p.message}" for p in STRATEGIES["script"].check(config, placed, 0)]

    def check(self) -> None:
        found = self.problems()
        self.problem.setText("\n".join(found))
        self.problem.setVisible(bool(found))
        self.watch_button.setEnabled(not found)
