"""The Experiments menu: one action per preset of engine.experiments, and the repeats setting.

The presets' names for people, descriptions and ids come from the engine's catalogue (torch-free),
so a preset added there shows up here with its description, and the settings it
chooses itself, as tooltip and status tip. Every other setting is the panel's.
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from engine.config import ExperimentConfig

DEFAULT_REPEATS = 3


def preset_base(config: ExperimentConfig) -> ExperimentConfig:
    """The preset's defaults for this machine, overridden by every setting of the experiment panel.

    All an experiment's base takes (engine.run_options.Option.in_experiment: not the strategy, which every
    preset chooses for each point, nor the nodes); what the panel leaves to the engine (None) stays the
    preset's. What else a preset sets itself it says (``Preset.sets``, in the menu).
    """
    from engine.experiments import default_config
    from engine.run_options import options
    return default_config({o.name: getattr(config, o.name) for o in options()
                           if o.in_experiment and getattr(config, o.name) is not None})


def preset_tip(preset) -> str:
    """What a preset does, then what it sets itself (the rest is the panel's), then its id on the command line."""
    sets = f". Sets itself: {preset.sets}; the rest is the panel's." if preset.sets else "."
    return f"{preset.description}{sets} Command line: main.py experiment {preset.name}"


class ExperimentsMenu(QtWidgets.QMenu):
    sigPresetChosen = QtCore.Signal(str)   # preset name

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__("E&xperiments", parent)
        self.setToolTipsVisible(True)
        from engine.experiments import PRESETS  # torch-free: names, descriptions, point builders
        self.preset_actions: dict[str, QtGui.QAction] = {}
        for name, preset in PRESETS.items():
            action = self.addAction(preset.shown_name)
            action.setToolTip(preset_tip(preset))
            action.setStatusTip(preset_tip(preset))
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
        note = self.addAction("Runs use the panel's settings, except what each experiment sets itself (see its tip)")
        note.setEnabled(False)

    @property
    def repeats(self) -> int:
        return self.repeats_spin.value()

    def set_repeats(self, repeats: int) -> None:
        self.repeats_spin.setValue(repeats)

    def set_presets_enabled(self, enabled: bool) -> None:
        for action in self.preset_actions.values():
            action.setEnabled(enabled)
