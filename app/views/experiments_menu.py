"""The Experiments menu: one action per preset of engine.experiments, and the repeats setting.

The presets' names and descriptions come from the engine's catalogue (torch-free),
so a preset added there shows up here with its description as tooltip and status tip.
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from engine.config import ExperimentConfig

DEFAULT_REPEATS = 3


def preset_base(config: ExperimentConfig) -> ExperimentConfig:
    """The preset's defaults for this machine, overridden by what the experiment panel says.

    Only what a preset does not choose itself passes: the model and its shape, the
    devices, the batch, the steps and the micro-batches. Strategy, split and
    schedule are what the presets vary.
    """
    from engine.experiments import default_config
    explicit: dict = {"model": config.model, "devices": config.devices, "batch_size": config.batch_size,
                      "steps": config.steps, "warmup": min(2, config.steps - 1) if config.steps > 1 else 0}
    if config.model == "mlp":
        explicit.update(width=config.width, depth=config.depth)
    if config.model_file:
        explicit["model_file"] = config.model_file
    if config.micro_batches:
        explicit["micro_batches"] = config.micro_batches
    return default_config(explicit)


class ExperimentsMenu(QtWidgets.QMenu):
    sigPresetChosen = QtCore.Signal(str)   # preset name

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__("E&xperiments", parent)
        self.setToolTipsVisible(True)
        from engine.experiments import PRESETS   # torch-free: names, descriptions, point builders
        self.preset_actions: dict[str, QtGui.QAction] = {}
        for name, preset in PRESETS.items():
            action = self.addAction(name)
            action.setToolTip(preset.description)
            action.setStatusTip(preset.description)
            action.setObjectName(f"experiment-{name}")
            action.triggered.connect(lambda _checked=False, n=name: self.sigPresetChosen.emit(n))
            self.preset_actions[name] = action
        self.addSeparator()
        # The repeats as a spin box inside the menu: seen where it matters, changed without a dialog.
        box = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(box)
        row.setContentsMargins(24, 4, 12, 4)
        row.addWidget(QtWidgets.QLabel("Repeats per point"))
        self.repeats_spin = QtWidgets.QSpinBox(minimum=1, maximum=100, value=DEFAULT_REPEATS)
        self.repeats_spin.setObjectName("repeatsSpin")
        self.repeats_spin.setToolTip("Each point runs this many times: the bars show mean ± std over them")
        row.addWidget(self.repeats_spin)
        self.repeats_action = QtWidgets.QWidgetAction(self)
        self.repeats_action.setDefaultWidget(box)
        self.addAction(self.repeats_action)
        note = self.addAction("Runs use the panel's model, devices, batch size and steps")
        note.setEnabled(False)

    @property
    def repeats(self) -> int:
        return self.repeats_spin.value()

    def set_presets_enabled(self, enabled: bool) -> None:
        for action in self.preset_actions.values():
            action.setEnabled(enabled)
