"""TraceFlow: File › Open traces… and Open trace files…: a job's profiler traces (one file per rank) opened as a
run of kind trace; File › Open the run's profiler traces: those the selected run recorded (--profile-steps), read
the same way into a run named for it and shown beside it (the kernels beside the hooks' kinds, compared).

The traces are read and stored in a child process (app/services/trace_reader.py: ``main.py trace --store``,
engine/traces/as_run.py), each file read said on the status line; then the history lists the run and selects
it, so it is shown as any stored run (each rank a device: its lanes in the timeline, its time by kind, the
findings; for many ranks the heatmaps and the outliers) and can be compared with a run or exported like one.
What goes wrong is one line on the status line and in the log.
"""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.controllers.window_port import WindowPort
from app.services.trace_reader import TraceReader
from app.state.app_model import AppModel

LAST_FOLDER = "traces/folder"   # the settings key: where the dialogs open next time
FILE_FILTER = "Profiler traces (*.json *.json.gz);;All files (*)"


class TraceFlow(QtCore.QObject):
    sigStored = QtCore.Signal(str)   # the run's id, once stored (the history then selects it)
    sigFailed = QtCore.Signal(str)   # why, in one line

    def __init__(self, model: AppModel, port: WindowPort, history, settings: QtCore.QSettings,
                 parent: QtCore.QObject | None = None):
        """``settings``: the window's, where the dialogs' last folder is kept."""
        super().__init__(parent)
        self.model, self.port = model, port
        self.history = history
        self.settings = settings
        self.paths: list[str] = []   # those being read
        self._beside: str | None = None   # the run whose stored traces are being read: shown with them
        self.reader = TraceReader(model.db_path, self)
        self.reader.sigProgress.connect(self._progress)
        self.reader.sigStored.connect(self._stored)
        self.reader.sigFailed.connect(self._failed)

    def open_folder(self) -> None:
        """A folder of a job's traces, each of its .json and .json.gz files a rank."""
        folder = QtWidgets.QFileDialog.getExistingDirectory(
            self.port.parent_widget(), "Open traces: a folder of profiler traces, a file per rank", self._start_folder())
        if folder:
            self.open_paths([folder])

    def open_files(self) -> None:
        """Trace files, each a rank (of one job)."""
        files, _ = QtWidgets.QFileDialog.getOpenFileNames(
            self.port.parent_widget(), "Open trace files: a file per rank", self._start_folder(), FILE_FILTER)
        if files:
            self.open_paths(files)

    def open_paths(self, paths: list[str]) -> None:
        """Read the traces ``paths`` name (files or folders), off the UI thread; a reading under way is ended."""
        self.paths, self._beside = [str(p) for p in paths], None
        self.settings.setValue(LAST_FOLDER, str(Path(self.paths[0]).expanduser().resolve().parent)
                                      if Path(self.paths[0]).is_file() else self.paths[0])
        self.model.log(f"Reading the traces of {self._named()}…", status=True)
        self.reader.read(self.paths)

    def open_selected_run(self) -> None:
        """The profiler traces of the one run selected in the history, read into a run of kind trace and compared
        with it; without one selected, said on the status line."""
        selected = self.history.selected_ids()
        if len(selected) != 1:
            self.model.log("Select one run in the history: its profiler traces (recorded with --profile-steps) "
                            "are read and shown beside it", status=True)
            return
        self.paths, self._beside = [f"run {selected[0]}"], selected[0]
        self.model.log(f"Reading the profiler traces of run {selected[0]}…", status=True)
        self.reader.read_run(selected[0])

    def busy(self) -> bool:
        return self.reader.busy()

    def close(self) -> None:
        self.reader.close()

    def _start_folder(self) -> str:
        return str(self.settings.value(LAST_FOLDER, "") or "")

    def _named(self) -> str:
        first = Path(self.paths[0]).name if self.paths else "?"
        return first + (f" and {len(self.paths) - 1} more" if len(self.paths) > 1 else "")

    def _progress(self, done: int, total: int, path: str) -> None:
        self.model.set_status(f"Reading the traces of {self._named()}: {done} of {total} files read "
                               f"({Path(path).name})…")

    def _stored(self, run_id: str) -> None:
        self.model.log(f"Traces of {self._named()} stored as run {run_id}", status=True)
        self.history.show_page("runs")
        self.history.refresh()
        # the selection loads it onto the plots (HistoryFlow); with the run it was read from, compared side by side
        self.history.select_ids([run_id] + ([self._beside] if self._beside else []))
        self.sigStored.emit(run_id)

    def _failed(self, why: str) -> None:
        text = f"Could not open the traces of {self._named()}: {why}"
        self.model.log(text, status=True, level="error")
        self.sigFailed.emit(text)
