"""HistoryPanel: the runs and the experiments in the store.

Runs: the configuration that tells them apart (app/state/run_settings.py: model,
strategy, devices, split, micro-batches, schedule, batch, input prep and whatever
else differs among the runs listed) and their key figures; select one to see it,
several to compare. Experiments: each a named set of runs; select one to see its
result (bars, sweep, table). A switch at the top shows one list or the other.
Rows are one line of text high, so the tab shows as many as fit; a refresh shows
the newest runs (or the selection), a selection made for the user scrolls to it.
"""
from __future__ import annotations

import sqlite3
import threading
import time
import weakref

from PySide6 import QtCore, QtGui, QtWidgets

from app.state import run_settings
from app.state.live_data import TIMELINE_STEPS, physical_names
from app.state.stored_run import RunData
from app.views import theme
from app.views.elided_label import ElidedLabel
from app.views.experiment_history import ExperimentTable
from app.views.table_rows import one_line_rows, show_selection_or_top
from engine.experiments.presets import preset_title
from engine.results import RunSummary
from engine.store import RunRecord, Store, open_store

COLUMNS = ("started", "status", "experiment", "model", "strategy", "devices", "split", "µ-batches", "schedule",
           "batch", "input prep", "other settings", "step time", "samples/s", "bubble meas. / theory",
           "stage balance", "loss", "error")


STEP_TIME_COLUMN = COLUMNS.index("step time")


def disturbed(summary: RunSummary) -> str | None:
    """The run's "disturbed" mark (engine/telemetry/summary.py disturbance): others took its devices' cores."""
    return summary.telemetry.disturbed if summary.telemetry else None


def _fmt(value, spec: str = ".3g") -> str:
    return "—" if value is None else format(value, spec)


def run_label(record: RunRecord) -> str:
    started = time.strftime("%H:%M:%S", time.localtime(record.started))
    return f"{started} {record.config.strategy}"


def row_values(record: RunRecord, experiment_names: dict[str, str] | None = None,
               other_keys: list[str] | None = None) -> list[str]:
    """The run's row; ``other_keys``: the settings that differ among the runs listed (run_settings.differing)."""
    c, s = record.config, record.summary or RunSummary()
    split = s.split if s.split is not None else c.split
    # The devices' names, as the plots and the summary name them ("--devices cpu:1" is one device, cpu:0),
    # also for a run that has no summary yet.
    devices = ",".join(s.devices or physical_names(c)) or c.devices
    return [
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started)),
        record.status,
        experiment_text(record, experiment_names or {}),
        run_settings.model_text(c),
        c.strategy,
        str(devices),
        ",".join(map(str, split)) if split else "—",
        run_settings.micro_batches_text(c, record.summary),
        run_settings.schedule_text(c, record.summary),
        run_settings.batch_text(c, record.summary),
        run_settings.input_prep_text(c),
        run_settings.others_text(c, other_keys or []),
        "—" if s.step_time_s is None
        else f"{s.step_time_s.mean * 1000:.1f} ms" + (", disturbed" if disturbed(s) else ""),
        "—" if s.throughput is None else f"{s.throughput.mean:,.0f}",
        f"{_fmt(s.bubble.measured, '.1%')} / {_fmt(s.bubble.theory, '.1%')}" if record.summary else "—",
        # Only with stage_busy: earlier summaries' balance counted drawing the batch (not comparable).
        _fmt(s.stage_balance if s.stage_busy else None, ".2f"),
        "—" if not s.loss else f"{s.loss.first or 0:.3f} → {s.loss.last or 0:.3f}",
        (record.error or "").splitlines()[0][:120] if record.error else "",
    ]


def experiment_text(record: RunRecord, names: dict[str, str]) -> str:
    """"Compare pipeline schedules: gpipe": the experiment a run belongs to and its point, or "" for a single
    run."""
    if not record.experiment_id:
        return ""
    name = preset_title(names.get(record.experiment_id, "experiment"))
    return f"{name}: {record.label}" if record.label else name


PLOT_POINTS = 5000       # step rows read for a stored run's plots (every k-th step of a longer run)
SAMPLE_ROWS = 5000       # telemetry rows per device, the same way


def load_runs(db_path: str | None, run_ids: list[str]) -> list[RunData]:
    """Read runs for display (own connection: any thread): the summary, every k-th step, telemetry in
    buckets, and the intervals of the last steps that kept them. A 200,000-step run opens as fast as a
    short one; its full data stays in the store for exports."""
    out = []
    with open_store(db_path) as store:
        for run_id in run_ids:
            record = store.get_run(run_id)
            if record is None:
                continue
            last_kept = store.timeline_steps(run_id, last=TIMELINE_STEPS)
            rows, span = store.sample_span(run_id)
            devices = max(1, len(record.summary.devices) if record.summary else 1)
            bucket = span / SAMPLE_ROWS if rows > SAMPLE_ROWS * devices else None
            out.append(RunData(run_id=record.id, label=run_label(record), status=record.status,
                               config=record.config, summary=record.summary, error=record.error,
                               steps=store.steps(run_id, at_most=PLOT_POINTS),
                               timeline=store.timeline(run_id, steps=last_kept),
                               samples=store.samples(run_id, bucket_s=bucket),
                               step_count=store.step_count(run_id),
                               timeline_steps=store.timeline_step_count(run_id)))
    return out


RUNS_HINT = "Select a run to see its plots; select several (Ctrl/Shift) to compare them."
EXPERIMENTS_HINT = "Select an experiment to see its result."


class HistoryPanel(QtWidgets.QWidget):
    sigSelectionChanged = QtCore.Signal(list)   # run ids, newest first
    sigLoaded = QtCore.Signal(int, list, str)   # token, [RunData], why nothing could be read ("": read)
    sigExperimentSelected = QtCore.Signal(str)  # experiment id

    def __init__(self, store: Store, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.store = store
        self.records: list[RunRecord] = []
        self._token = 0
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        bar = QtWidgets.QHBoxLayout()
        # Runs or experiments: two checkable buttons acting as one switch.
        self.runs_button = QtWidgets.QPushButton("Runs")
        self.experiments_button = QtWidgets.QPushButton("Experiments")
        self.page_group = QtWidgets.QButtonGroup(self)
        for i, button in enumerate((self.runs_button, self.experiments_button)):
            button.setCheckable(True)
            self.page_group.addButton(button, i)
            bar.addWidget(button)
        self.runs_button.setChecked(True)
        self.page_group.idClicked.connect(lambda i: self.show_page("experiments" if i else "runs"))
        # The store's path cut in its middle (its file's name stays), given more room than the hint beside it,
        # which says what every user learns once.
        self.count_label = ElidedLabel(mode=QtCore.Qt.TextElideMode.ElideMiddle)
        self.count_label.setObjectName("muted")
        bar.addWidget(self.count_label, 3)
        self.hint = ElidedLabel(RUNS_HINT)
        self.hint.setObjectName("muted")
        self.hint.setAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
        bar.addWidget(self.hint, 2)
        self.refresh_button = QtWidgets.QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        bar.addWidget(self.refresh_button)
        layout.addLayout(bar)
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("historyTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.experiments = ExperimentTable()
        for table in (self.table, self.experiments):
            one_line_rows(table)
        self.experiments.sigExperimentSelected.connect(self.sigExperimentSelected)
        self.pages = QtWidgets.QStackedWidget()
        self.pages.addWidget(self.table)
        self.pages.addWidget(self.experiments)
        layout.addWidget(self.pages)

    @property
    def page(self) -> str:
        return "experiments" if self.pages.currentIndex() == 1 else "runs"

    def show_page(self, page: str) -> None:
        index = 1 if page == "experiments" else 0
        self.pages.setCurrentIndex(index)
        self.page_group.button(index).setChecked(True)
        self.hint.setText(EXPERIMENTS_HINT if index else RUNS_HINT)

    def refresh(self) -> None:
        selected = set(self.selected_ids())
        try:
            self.records = self.store.list_runs(limit=500)
        except sqlite3.Error as exc:   # the store process gone (the next call starts another) or the file damaged
            self.count_label.setText(f"could not read {self.store.path}: {exc}")
            return
        other_keys = run_settings.differing([r.config for r in self.records])
        run_counts: dict[str, int] = {}
        for record in self.records:
            if record.experiment_id:
                run_counts[record.experiment_id] = run_counts.get(record.experiment_id, 0) + 1
        self.experiments.refresh(self.store, run_counts)
        self.table.blockSignals(True)
        try:
            self.table.setRowCount(len(self.records))
            status_colors = {"finished": theme.OK, "failed": theme.ERROR, "stopped": theme.WARNING,
                             "interrupted": theme.WARNING, "running": theme.FOREGROUND}
            for r, record in enumerate(self.records):
                for c, text in enumerate(row_values(record, self.experiments.names, other_keys)):
                    item = QtWidgets.QTableWidgetItem(text)
                    if c == 0:
                        item.setData(QtCore.Qt.ItemDataRole.UserRole, record.id)
                        item.setToolTip(record.id)
                    if c == 1:
                        item.setForeground(QtGui.QColor(status_colors.get(record.status, theme.FOREGROUND)))
                    if c == len(COLUMNS) - 1 and record.error:
                        item.setToolTip(record.error)
                    if c == STEP_TIME_COLUMN and record.summary and disturbed(record.summary):
                        item.setToolTip(disturbed(record.summary))
                        item.setForeground(QtGui.QColor(theme.WARNING))
                    self.table.setItem(r, c, item)
            selection = self.table.selectionModel()
            for r, record in enumerate(self.records):
                if record.id in selected:
                    selection.select(self.table.model().index(r, 0),
                                     QtCore.QItemSelectionModel.SelectionFlag.Select
                                     | QtCore.QItemSelectionModel.SelectionFlag.Rows)
        finally:
            self.table.blockSignals(False)
        show_selection_or_top(self.table)
        n_exp = len(self.experiments.ids)
        self.count_label.setText(f"{len(self.records)} run{'s' if len(self.records) != 1 else ''}, "
                                 f"{n_exp} experiment{'s' if n_exp != 1 else ''} in {self.store.path}")

    def run_ids(self) -> list[str]:
        return [r.id for r in self.records]

    def selected_ids(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.table.item(r, 0).data(QtCore.Qt.ItemDataRole.UserRole) for r in rows
                if self.table.item(r, 0) is not None]

    def select_ids(self, run_ids: list[str]) -> None:
        wanted = set(run_ids)
        self.table.clearSelection()
        selection = self.table.selectionModel()
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).data(QtCore.Qt.ItemDataRole.UserRole) in wanted:
                selection.select(self.table.model().index(r, 0),
                                 QtCore.QItemSelectionModel.SelectionFlag.Select
                                 | QtCore.QItemSelectionModel.SelectionFlag.Rows)
        show_selection_or_top(self.table)

    def clear_selection_quietly(self) -> None:
        """Deselect every run without asking to load none (the live plots take the view)."""
        self.table.blockSignals(True)
        self.table.clearSelection()
        self.table.blockSignals(False)

    def newest_run_id(self) -> str | None:
        return self.records[0].id if self.records else None

    def selected_experiment_id(self) -> str | None:
        """The experiment selected on the Experiments page; None on the Runs page."""
        return self.experiments.selected_id() if self.page == "experiments" else None

    def select_experiment(self, experiment_id: str) -> None:
        self.experiments.select_id(experiment_id)

    def mark_running_experiment(self, experiment_id: str | None) -> None:
        """The experiment the list marks as running (None: none is), and what is stored now."""
        self.experiments.running_id = experiment_id
        self.refresh()

    def _on_selection(self) -> None:
        self.sigSelectionChanged.emit(self.selected_ids())

    def load(self, run_ids: list[str]) -> int:
        """Load runs on a background thread (a long run has many samples); sigLoaded answers."""
        self._token += 1
        token = self._token
        db_path = str(self.store.path)
        panel = weakref.ref(self)   # the thread must not hold the last reference to a widget: it would go there

        def work():
            try:
                runs, error = load_runs(db_path, run_ids), ""
            except Exception as exc:  # a store gone or damaged: said in the window, never a crash
                runs, error = [], f"could not read the runs from {db_path}: {type(exc).__name__}: {exc}"
            try:
                alive = panel()
                if alive is not None:
                    alive.sigLoaded.emit(token, runs, error)
            except RuntimeError:  # the panel was closed while we read
                pass

        threading.Thread(target=work, name="history-loader", daemon=True).start()
        return token

    @property
    def latest_token(self) -> int:
        return self._token
