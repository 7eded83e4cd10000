"""The experiment form kept between sessions (QSettings): its config as JSON, and what the form shows that its
config leaves out. ``panel``: the ExperimentPanel (app/views/experiment_panel.py), which calls these."""
from __future__ import annotations

from PySide6 import QtCore

from engine.config import ExperimentConfig

# What the form shows that its config leaves out (a pipeline's micro-batching while another strategy is
# picked, the stages per device, a token file chosen, the image size of a model without one): kept too.
FORM_KEYS = ("mb_mode", "mb_value", "stages_per_device", "image_size", "split_level", "token_file")
FIRST_FORM = ExperimentConfig(strategy="model-parallel", devices="cpu:2")   # the tutorial's, at first start


def save(panel, settings: QtCore.QSettings) -> None:
    """The form as its config (ExperimentConfig's JSON: every option, declared once there) and the
    ``FORM_KEYS``."""
    settings.setValue("experiment/config", panel.config().to_json())
    form = (panel.mb_mode.currentData(), panel.mb_spin.value(), panel.per_device_spin.value(),
            panel.image_spin.value(), panel.level_combo.currentData(), panel.nodes_row.chosen_token_file() or "")
    for key, value in zip(FORM_KEYS, form, strict=True):
        settings.setValue(f"experiment/{key}", value)


def restore(panel, settings: QtCore.QSettings) -> None:
    """``save``'s form back into ``panel`` (a config another version stored that no longer reads: the first form); the panel
    refreshes its rows after."""
    from app.settings import read_int, read_str
    from engine.config import ConfigError
    try:
        stored = read_str(settings, "experiment/config", "")
        config = ExperimentConfig.from_json(stored) if stored else FIRST_FORM
    except ConfigError:
        config = FIRST_FORM
    # The form's micro-batching and stages first; the config's own where it has them (apply_changes).
    panel.mb_mode.setCurrentIndex(max(0, panel.mb_mode.findData(read_str(settings, "experiment/mb_mode",
                                                                        "micro_batches"))))
    panel.mb_spin.setValue(read_int(settings, "experiment/mb_value", 4))
    panel.per_device_spin.setValue(read_int(settings, "experiment/stages_per_device", 2))
    panel.apply_changes(config.to_dict())
    panel.apply_changes({"image_size": read_int(settings, "experiment/image_size", 0),
                         "split_level": read_int(settings, "experiment/split_level", 1),
                         "token_file": read_str(settings, "experiment/token_file", "") or None})
