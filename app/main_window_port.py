"""MainWindowPort: the main window's side of app/controllers/window_port.py, the one object controllers get.

Each method forwards to the window's own; a controller holding this holds no more of the
window than the port names.
"""
from __future__ import annotations

from PySide6 import QtWidgets

from engine.config import ExperimentConfig


class MainWindowPort:
    def __init__(self, window: QtWidgets.QMainWindow):
        """``window``: app/main_window.py's MainWindow (not imported: it imports this module)."""
        self._window = window

    def current_config(self) -> ExperimentConfig:
        return self._window.current_config()

    def panel_config(self) -> ExperimentConfig:
        return self._window.panel_config()

    def fill_form(self, changes: dict, split: list[int] | None = None) -> None:
        self._window.experiment.apply_changes(changes)
        if split is not None:
            self._window.split_view.set_split(split)   # after the form's changes: its stages are the new ones

    def show_watched_command(self, config: ExperimentConfig | None) -> None:
        self._window.show_watched_command(config)

    def set_redraw_busy(self, busy: bool) -> None:
        self._window.set_redraw_busy(busy)

    def update_progress(self) -> None:
        self._window.update_progress()

    def start_run(self) -> None:
        self._window.start_run()

    def stop_work(self) -> None:
        self._window.stop_run()

    def close(self) -> bool:
        return self._window.close()

    def force_close(self) -> None:
        window = self._window
        window.shutdown()
        window.hide()
        window.deleteLater()

    @property
    def closed(self) -> bool:
        return self._window.closed

    def parent_widget(self) -> QtWidgets.QWidget:
        return self._window
