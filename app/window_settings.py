"""What the window remembers between launches: its geometry, splitters, tab, export folders and the experiment."""
from __future__ import annotations

from PySide6 import QtCore

from app.settings import read_int, read_str


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
        window.right_split.setSizes([700, 220])
    window.tabs.setCurrentIndex(read_int(s, "window/tab", 0))
    export_dir = read_str(s, "export/dir")
    for plot in window.plots.plots.values():
        plot.export_dir = export_dir
    window.exporter.directory = read_str(s, "export/report_dir")
    window.experiments.menu.repeats_spin.setValue(read_int(s, "experiments/repeats", 3))
    window.experiment.restore(s)


def save(window) -> None:
    s = window.settings
    s.setValue("window/geometry", window.saveGeometry())
    s.setValue("window/main_split", window.main_split.saveState())
    s.setValue("window/right_split", window.right_split.saveState())
    s.setValue("window/tab", window.tabs.currentIndex())
    s.setValue("telemetry/hz", window.telemetry_hz)
    dirs = [plot.export_dir for plot in window.plots.plots.values() if plot.export_dir]
    if dirs:
        s.setValue("export/dir", dirs[-1])
    s.setValue("export/report_dir", window.exporter.directory)
    s.setValue("experiments/repeats", window.experiments.menu.repeats)
    window.experiment.save(s)
    s.sync()
