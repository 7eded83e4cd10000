"""What the window remembers between launches: its geometry, splitters, tab and the experiment."""
from __future__ import annotations

from PySide6 import QtCore

from app.settings import read_int


def restore(window) -> None:
    s = window.settings
    geometry = s.value("window/geometry")
    if isinstance(geometry, (QtCore.QByteArray, bytes)):
        window.restoreGeometry(geometry)
    for key, split in (("window/main_split", window.main_split), ("window/right_split", window.right_split)):
        state = s.value(key)
        if isinstance(state, (QtCore.QByteArray, bytes)):
            split.restoreState(state)
    if s.value("window/main_split") is None:
        window.main_split.setSizes([430, 1070])
        # The history a few rows tall at first: at 1280x800 the plots' findings need the room to read whole.
        window.right_split.setSizes([760, 160])
    window.tabs.setCurrentIndex(read_int(s, "window/tab", 0))
    # Export folders are remembered as they are chosen (app/settings.py last_folder), not here.
    window.experiments.menu.set_repeats(read_int(s, "experiments/repeats", 3))
    window.experiment.restore(s)


def save(window) -> None:
    s = window.settings
    s.setValue("window/geometry", window.saveGeometry())
    s.setValue("window/main_split", window.main_split.saveState())
    s.setValue("window/right_split", window.right_split.saveState())
    s.setValue("window/tab", window.tabs.currentIndex())
    s.setValue("telemetry/hz", window.telemetry_hz)
    s.setValue("experiments/repeats", window.experiments.menu.repeats)
    window.experiment.save(s)
    s.sync()
