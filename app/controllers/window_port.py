"""WindowPort: all a controller may ask of the window, and nothing more.

Controllers get the app's model (app/state/app_model.py) for what they change and
announce, the views they draw on, and this port for the few things only the window
can do: read the form, fill it, show a watched script's command in its place, pace
its redraw, start or stop work, close. They never get the window itself (app/main_window.py
hands them ``MainWindowPort``, app/main_window_port.py; the import contracts in .importlinter
keep them from importing either).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from PySide6 import QtWidgets

from engine.config import ExperimentConfig


@runtime_checkable
class WindowPort(Protocol):
    def current_config(self) -> ExperimentConfig:
        """The experiment the form and the split view describe (may raise when its values make no config)."""

    def panel_config(self) -> ExperimentConfig:
        """The form's run options, the split left to the engine."""

    def fill_form(self, changes: dict, split: list[int] | None = None) -> None:
        """The form set to ``changes`` (then the split view to ``split``, its stages being the new ones)."""

    def show_watched_command(self, config: ExperimentConfig | None) -> None:
        """A watched script's command in the form's place while it runs (None: the form again)."""

    def set_redraw_busy(self, busy: bool) -> None:
        """Redraw at the telemetry's rate while work goes, slowly when idle."""

    def update_progress(self) -> None:
        """The status line and the progress bar from the work going (an experiment's, else the run's)."""

    def start_run(self) -> None:
        """Run, as a click on Run would."""

    def stop_work(self) -> None:
        """Stop, as Esc would: the advise, the experiment or the run going."""

    def close(self) -> bool:
        """Close the window as the user would (it asks when work goes)."""

    def force_close(self) -> None:
        """Shut down, hide and delete the window without asking (the work did not stop in time)."""

    @property
    def closed(self) -> bool:
        """The window has shut down."""

    def parent_widget(self) -> QtWidgets.QWidget:
        """Only as the parent of a dialog or a menu a controller makes, so that it shows over the window."""
