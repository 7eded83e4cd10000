"""HistoryFlow: what the History tab's selection puts in view, and what File › Export then writes.

Selecting runs loads them on the panel's loader thread and shows them on the plots;
selecting an experiment shows its result. Export writes what is in view: the
experiment's result, else the selected (or shown) runs, else the newest run.
"""
from __future__ import annotations

from PySide6 import QtCore

from app.state.app_model import AppModel
from app.state.stored_run import RunData


class HistoryFlow(QtCore.QObject):
    sigRunsShown = QtCore.Signal(list)   # run ids now on the plots

    def __init__(self, model: AppModel, history, center, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model = model
        self.history = history
        self.center = center        # app/views/center_area.py: where stored runs and results are drawn
        self.shown_runs: list[str] = []
        history.sigSelectionChanged.connect(self._on_selection)
        history.sigLoaded.connect(self._on_loaded)
        history.sigExperimentSelected.connect(self._on_experiment_selected)

    def leave(self) -> None:
        """The live plots take the view: no stored run is shown or selected any more."""
        self.history.clear_selection_quietly()
        self.shown_runs = []

    def export_target(self, experiment_in_view: str | None) -> tuple[str, str] | None:
        """("experiment" | "run", id) for File › Export, or None when there is nothing to export.
        ``experiment_in_view``: the experiment whose result is in front, if one is."""
        experiment = experiment_in_view or self.history.selected_experiment_id()
        if experiment:
            return "experiment", experiment
        runs = self.history.selected_ids() or self.shown_runs
        newest = self.history.newest_run_id()
        if runs:
            return "run", runs[0]
        return ("run", newest) if newest else None

    def _on_selection(self, run_ids: list) -> None:
        if run_ids:
            self.history.load(run_ids)

    def _on_loaded(self, token: int, runs: list[RunData], error: str) -> None:
        if token != self.history.latest_token:
            return  # a newer selection is loading
        if error:
            self.model.log(error, status=True, level="error")
            self.center.show_error(error)
        if not runs:
            return
        self.center.show_stored_runs(runs)
        self.shown_runs = [r.run_id for r in runs]
        if len(runs) == 1 and runs[0].status in ("failed", "interrupted") and runs[0].error:
            self.center.show_error(f"Run {runs[0].label} {runs[0].status}: {runs[0].error}")
        self.sigRunsShown.emit(self.shown_runs)

    def _on_experiment_selected(self, experiment_id: str) -> None:
        from engine.experiments import stored_result
        store = self.history.store
        experiment = store.get_experiment(experiment_id)
        if experiment is not None:
            self.center.show_experiment_result(stored_result(store, experiment))
