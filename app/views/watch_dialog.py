"""Run › Watch a script…: the user's own training script, its arguments, how it is started (torchrun's ranks or
one plain python process, engine.config.SCRIPT_LAUNCHES), the devices, the nodes (agents started with
``--allow-scripts``) and how many steps to watch, as ``main.py watch`` takes them; the config it makes is
``--strategy script``'s (engine/strategies/script.py), checked by the engine's torch-free rules as it is typed, so
Watch is enabled only for a config that can launch and a problem names its field."""
from __future__ import annotations

import os
import shlex

from PySide6 import QtWidgets

from app.views import theme
from app.views.nodes_row import NodesRow
from app.views.tips import add_described
from engine import devices as devices_mod
from engine.config import SCRIPT_LAUNCHES, ExperimentConfig
from engine.environment import ROOT
from engine.rules import problems
from engine.run.resolved_run import run_devices
from engine.strategies import STRATEGIES
from engine.strategies.script import DEFAULT_DEVICES, PLAIN, PLAIN_DEVICES, script_config

FIELD_OF = {"script": "script", "script_args": "arguments", "script_cwd": "script", "script_launch": "run as",
            "devices": "devices", "steps": "steps", "nodes": "nodes", "token_file": "nodes"}
TORCHRUN = "torchrun"   # config.script_launch's default: a rank per device
# The launches' names on their buttons (their descriptions are engine.config.SCRIPT_LAUNCHES')
LAUNCH_LABELS = {TORCHRUN: "torchrun ranks (one per device)", PLAIN: "plain python (one process)"}
DEVICES_TIPS = {
    TORCHRUN: '"cpu:N": one rank per CPU virtual device, each pinned to a core of its own; '
              '"cuda:0,cuda:1,...": one rank per GPU, rank k on cuda:k (its LOCAL_RANK)',
    PLAIN: 'One device, for the one process: "auto": the first GPU where there is one, else this machine\'s cores; '
           '"cpu:1": this machine\'s cores, unpinned; "cuda:0": the GPUs, which the script picks itself',
}
DEVICES_DEFAULT = {TORCHRUN: DEFAULT_DEVICES, PLAIN: PLAIN_DEVICES}


class WatchDialog(QtWidgets.QDialog):
    def __init__(self, parent=None, script: str = "", args: str = "", devices: str | None = None,
                 nodes: str | None = None, token_file: str | None = None, launch: str = TORCHRUN, gpus: int = 0):
        """``devices``: the ``launch``'s (None: its default); ``gpus``: the CUDA GPUs this machine has, for the
        devices' check."""
        super().__init__(parent)
        launch = launch if launch in SCRIPT_LAUNCHES else TORCHRUN
        self.gpus = gpus
        # each launch's devices as last typed: a switch to plain python and back keeps the ranks' list
        self.devices_of = dict(DEVICES_DEFAULT)
        if devices:
            self.devices_of[launch] = devices
        self.setWindowTitle("Watch a script")
        self.setMinimumWidth(560)
        self.script = QtWidgets.QLineEdit(script)
        self.script.setPlaceholderText("train.py: your training script, unmodified")
        browse = QtWidgets.QPushButton("Browse…")
        browse.clicked.connect(self.browse)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.script, 1)
        row.addWidget(browse)
        self.args = QtWidgets.QLineEdit(args)
        self.args.setPlaceholderText("--epochs 1 --batch-size 64 (its own arguments, as on a command line)")
        self.launch_combo = QtWidgets.QComboBox()   # as the panel's choices: each item described in its tooltip
        self.launch_combo.setObjectName("scriptLaunchCombo")
        for name, description in SCRIPT_LAUNCHES.items():
            add_described(self.launch_combo, LAUNCH_LABELS.get(name, name), name, f"{name}: {description}")
        self.launch_combo.setCurrentIndex(self.launch_combo.findData(launch))
        self.launch_caption = QtWidgets.QLabel()   # the chosen launch's description
        self.launch_caption.setObjectName("muted")
        self.launch_caption.setWordWrap(True)
        launch_box = QtWidgets.QVBoxLayout()
        launch_box.setContentsMargins(0, 0, 0, 0)
        launch_box.setSpacing(2)
        launch_box.addWidget(self.launch_combo)
        launch_box.addWidget(self.launch_caption)
        self.shown_launch = launch
        self.devices = QtWidgets.QLineEdit(self.devices_of[launch])
        self.nodes = NodesRow()
        self.nodes.set_nodes(nodes)
        self.nodes.set_token_file(token_file)
        self.nodes.edit.setToolTip("Blank: this machine. Or the agents of other machines (`python main.py node "
                                   "--listen ADDR:PORT --allow-scripts` on each): the script travels to every "
                                   "node and runs there, on the devices above; ranks go node by node.")
        self.steps = QtWidgets.QSpinBox()
        self.steps.setRange(0, 10_000_000)
        self.steps.setSpecialValueText("until the script ends")
        self.steps.setToolTip("Stop the script after this many training steps (each optimizer stepped once)")
        form = self.form = QtWidgets.QFormLayout()
        form.addRow("Script", row)
        form.addRow("Arguments", self.args)
        form.addRow("Run as", launch_box)
        form.addRow("Devices", self.devices)
        form.addRow("Nodes", self.nodes)
        form.addRow("Stop after steps", self.steps)
        self.problem = QtWidgets.QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet(f"color: {theme.ERROR};")
        note = QtWidgets.QLabel("The script runs unmodified (with Nodes, as torchrun ranks, its text travels to every "
                                "node's agent, which must allow scripts); its output goes to the Log tab and the run "
                                "to the history.")
        note.setWordWrap(True)
        self.buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.watch_button = self.buttons.addButton("Watch", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.problem)
        layout.addStretch(1)   # a row hidden (plain python's nodes) leaves its room above the buttons
        layout.addWidget(self.buttons)
        for edit in (self.script, self.args, self.devices):
            edit.textChanged.connect(self.check)
        self.steps.valueChanged.connect(self.check)
        self.nodes.sigChanged.connect(self.check)
        self.nodes.edit.textChanged.connect(self.check)
        self.launch_combo.currentIndexChanged.connect(self.launch_changed)
        self.show_launch()
        self.check()

    def launch(self) -> str:
        """How the script is started: a key of SCRIPT_LAUNCHES (config.script_launch)."""
        return self.launch_combo.currentData()

    def set_launch(self, name: str) -> None:
        self.launch_combo.setCurrentIndex(self.launch_combo.findData(name))

    def launch_changed(self) -> None:
        self.devices_of[self.shown_launch] = self.devices.text()
        self.shown_launch = self.launch()
        self.devices.setText(self.devices_of[self.shown_launch])   # plain python: one device (auto)
        self.show_launch()
        self.check()

    def show_launch(self) -> None:
        """The chosen launch's description, devices' help and whether nodes apply (torchrun's ranks only)."""
        launch = self.launch()
        self.launch_caption.setText(SCRIPT_LAUNCHES[launch])
        self.devices.setToolTip(DEVICES_TIPS.get(launch, ""))
        self.devices.setPlaceholderText(DEVICES_DEFAULT.get(launch, ""))
        # plain python is one process on this machine: no nodes (what they held stays for torchrun's ranks)
        self.form.setRowVisible(self.nodes, launch != PLAIN)

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
        launch = self.launch()
        config = script_config(script, shlex.split(self.args.text()),
                               devices=self.devices.text().strip() or DEVICES_DEFAULT.get(launch, DEFAULT_DEVICES),
                               steps=self.steps.value(), cwd=os.path.dirname(os.path.abspath(script)) if script
                               else None, launch=launch)
        if launch == PLAIN:   # one process on this machine: the nodes (hidden) stay for torchrun's ranks
            return config
        return config.replace(nodes=self.nodes.nodes(), token_file=self.nodes.token_file())

    def fields(self) -> dict[str, str | None]:
        """What the dialog opens with next time (its constructor's arguments)."""
        return dict(script=self.script.text(), args=self.args.text(), devices=self.devices.text(),
                    nodes=self.nodes.nodes(), token_file=self.nodes.chosen_token_file(), launch=self.launch())

    def problems(self) -> list[str]:
        try:
            config = self.config()
        except ValueError as exc:   # shlex: an unclosed quote
            return [f"arguments: {exc}"]
        found = [f"{FIELD_OF.get(p.option, p.option)}: {p.message}" for p in problems(config)]
        if config.nodes:   # the devices are each node's: their agents check them when Watch starts
            return found
        try:
            placed = run_devices(config, gpus=self.gpus)
        except devices_mod.DeviceError as exc:
            return found + [f"devices: {exc}"]
        return found + [f"devices: {p.message}" for p in STRATEGIES["script"].check(config, placed, 0)]

    def check(self) -> None:
        found = self.problems()
        self.problem.setText("\n".join(found))
        self.problem.setVisible(bool(found))
        self.watch_button.setEnabled(not found)
