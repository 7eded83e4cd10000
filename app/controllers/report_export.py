"""File › Export: a stored run or experiment as an HTML report, or PNG/SVG/PDF/CSV files, through engine.export.

HTML is one file (a save dialog); PNG, SVG, PDF and CSV are one file per figure,
named ``<id>-<figure>.<ext>``, in a folder (a folder dialog). Existing files
are never replaced without asking; a yes becomes ``force=True``. The export
itself runs on a named thread with its own store connection (an hour-long run
has many samples to read and draw), and answers with a signal.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app.controllers.window_port import WindowPort
from app.settings import last_folder, remember_folder
from app.state.app_model import AppModel
from app.views.plots.export import confirm_overwrite

REPORT_FOLDER = "export/report_dir"   # File > Export's last folder, apart from the plots' own

FORMATS = {  # format: (menu text, what it writes)
    "html": ("HTML report…", "a self-contained HTML report"),
    "png": ("PNG images…", "one PNG image per figure, in a folder"),
    "svg": ("SVG drawings…", "one SVG drawing per figure, in a folder"),
    "pdf": ("PDF documents…", "one PDF document per figure, in a folder"),
    "csv": ("CSV tables…", "one CSV table per figure (units in the header), in a folder"),
    "trace": ("Perfetto trace…", "a run's timeline and telemetry (an experiment's runs one after another) as "
              "Chrome Trace Event JSON, which Perfetto "
              "(ui.perfetto.dev) and chrome://tracing open"),
}
ONE_FILE = {"html": ("an HTML report", "HTML report (*.html)", ".html"),   # format: (what, filter, suffix)
            "trace": ("a Perfetto trace", "Chrome trace (*.json)", ".trace.json")}


class ReportExporter(QtCore.QObject):
    """Owns the File › Export actions; ``target()`` says what to export: ("run"|"experiment", id) or None.
    The outcome goes to the model's log and status line (a failure also in a message box), then the signals."""

    sigExported = QtCore.Signal(list)      # paths written (str)
    sigExportFailed = QtCore.Signal(str)   # message
    _sigDone = QtCore.Signal(int, object, str)   # token, paths or None, error

    def __init__(self, model: AppModel, port: WindowPort, target: Callable[[], tuple[str, str] | None],
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model, self.port = model, port
        self.db_path = model.db_path
        self.target = target
        self.busy = False
        self._token = 0
        self.actions: dict[str, QtGui.QAction] = {}
        for fmt, (text, tip) in FORMATS.items():
            action = QtGui.QAction(text, self)
            action.setStatusTip(f"Export the selected run or experiment as {tip}")
            action.setToolTip(action.statusTip())
            action.triggered.connect(lambda _checked=False, f=fmt: self.export_interactive(f))
            self.actions[fmt] = action
        self.actions["html"].setShortcut(QtGui.QKeySequence("Ctrl+E"))
        self._sigDone.connect(self._on_done, QtCore.Qt.ConnectionType.QueuedConnection)

    # -- asking (UI thread) -----------------------------------------------------------
    def export_interactive(self, fmt: str) -> bool:
        """Ask where, ask before replacing, then export in the background; False when nothing was started."""
        target = self.target()
        if target is None:
            QtWidgets.QMessageBox.information(
                self.port.parent_widget(), "Nothing to export",
                "Select a run or an experiment in History first (or finish a run).")
            return False
        kind, item_id = target
        if fmt == "trace" and kind == "experiment" and not self._has_runs(item_id):
            # Said before the file is asked for: nothing after the dialog should be a refusal.
            QtWidgets.QMessageBox.information(
                self.port.parent_widget(), "Nothing to trace",
                "This experiment has no runs stored: a trace holds its runs' timelines.")
            return False
        start_dir = Path(last_folder(REPORT_FOLDER) or Path.home())
        if fmt in ONE_FILE:
            what, file_filter, suffix = ONE_FILE[fmt]
            path, _ = QtWidgets.QFileDialog.getSaveFileName(
                self.port.parent_widget(), f"Export the {kind} as {what}", str(start_dir / f"{item_id}{suffix}"),
                file_filter, options=QtWidgets.QFileDialog.Option.DontConfirmOverwrite)
            if not path:
                return False
            if not path.lower().endswith((".html", ".htm") if fmt == "html" else ".json"):
                path += suffix
            out = Path(path)
            existing = [out] if out.exists() else []
            remember_folder(str(out.parent), REPORT_FOLDER)
        else:
            folder = QtWidgets.QFileDialog.getExistingDirectory(
                self.port.parent_widget(), f"Export the {kind}'s figures as {fmt.upper()} into a folder", str(start_dir))
            if not folder:
                return False
            out = Path(folder)
            existing = self._existing_targets(item_id, fmt, out)
            remember_folder(str(out), REPORT_FOLDER)
        if not confirm_overwrite(self.port.parent_widget(), existing):
            return False
        self.start(item_id, fmt, out, force=bool(existing))
        return True

    def _has_runs(self, experiment_id: str) -> bool:
        from engine.store import open_store
        try:
            with open_store(self.db_path) as store:
                return bool(store.list_runs(limit=1, experiment_id=experiment_id))
        except Exception:  # noqa: BLE001 - the export itself will report it, in the log and a message box
            return True

    def _existing_targets(self, item_id: str, fmt: str, out: Path) -> list[Path]:
        """The files of this export that already exist: the engine says which it would write."""
        from engine.export import planned_paths
        from engine.store import open_store
        try:
            with open_store(self.db_path) as store:
                return [p for p in planned_paths(store, item_id, fmt, out) if p.exists()]
        except Exception:  # noqa: BLE001 - the export itself will report it, in the log and a message box
            return []

    # -- exporting (a background thread) ---------------------------------------------------
    def start(self, item_id: str, fmt: str, out: Path, force: bool = False) -> None:
        self._token += 1
        token = self._token
        self.busy = True
        db_path = self.db_path
        exporter = weakref.ref(self)   # the thread must not hold the last reference to a Qt object

        def work():
            try:
                from engine.export import ExportError, export
                from engine.store import open_store
                with open_store(db_path) as store:
                    paths = export(store, item_id, fmt, out, force=force)
                result, error = [str(p) for p in paths], ""
            except ExportError as exc:
                result, error = None, str(exc)
            except Exception as exc:  # a failed export is a message, never a crash
                result, error = None, f"{type(exc).__name__}: {exc}"
            try:
                alive = exporter()
                if alive is not None:
                    alive._sigDone.emit(token, result, error)
            except RuntimeError:  # the window closed meanwhile
                pass

        threading.Thread(target=work, name="report-export", daemon=True).start()

    def _on_done(self, token: int, paths, error: str) -> None:
        if token != self._token:
            return
        self.busy = False
        if paths is None:
            message = f"export failed: {error}"
            self.model.log(message, status=True, level="error")
            QtWidgets.QMessageBox.warning(self.port.parent_widget(), "Export failed", message)
            self.sigExportFailed.emit(message)
            return
        where = str(Path(paths[0]).parent) if paths else ""
        self.model.log(f"exported {len(paths)} file{'s' if len(paths) != 1 else ''} to {where}: "
                        + ", ".join(Path(p).name for p in paths), status=True)
        self.sigExported.emit(list(paths))
