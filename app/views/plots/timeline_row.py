"""TimelineRow: the plots' bottom row, the timeline beside its bubble box; two runs compared, each run's timeline
and bubble side by side, each named by what sets it apart (engine/figures/run_names.py: "model-parallel m=1",
"pipeline m=4").

A run's timeline and bubble are drawn from its store rows here (``draw_stored``); the live run's come through
PlotPanel, which owns the live data.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.state import run_status
from app.state.finding_rows import theory_notes
from app.state.live_data import TIMELINE_STEPS
from app.state.stored_run import RunData
from app.views.elided_label import ElidedLabel
from app.views.plots.bubble_box import BubbleBox
from app.views.plots.timeline_view import TimelineView
from engine.record.summary import theory_formula
from engine.results import RunSummary
from engine.traces.as_run import is_trace_run

COMPARED = 2   # runs drawn side by side; the curves above overlay every run selected


class RunTimeline(QtWidgets.QWidget):
    """One run's timeline and bubble box, under the run's name where several are compared."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.name = ElidedLabel()
        self.name.setObjectName("sectionTitle")
        self.name.hide()
        self.timeline = TimelineView()
        self.bubble = BubbleBox()
        column = QtWidgets.QVBoxLayout()
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(self.name)
        column.addWidget(self.timeline, 1)
        row = QtWidgets.QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(6)
        row.addLayout(column, 1)
        row.addWidget(self.bubble)

    def name_run(self, name: str | None) -> None:
        """Whose timeline and bubble these are (None: the one run in view, named by the plots' title)."""
        self.name.setText(name or "")
        self.name.setVisible(bool(name))
        self.bubble.name_run(name)

    def draw_stored(self, run: RunData, note: str = "") -> None:
        """A stored run's last kept steps and its bubble; ``note``: a line more under the formula."""
        summary = run.summary or RunSummary()
        devices = list(summary.devices)
        self.timeline.set_devices(devices)
        last_steps = sorted({row[0] for row in run.timeline})[-TIMELINE_STEPS:]
        self.timeline.set_rows([tuple(row) for row in run.timeline if row[0] in last_steps])
        self.timeline.set_busy(dict(zip(devices, summary.devices_busy, strict=False)),
                               run_status.measured_steps(summary))
        stages = len(summary.split) + 1 if summary.split else len(devices)
        self.bubble.show_legend(drawn_kinds(self.timeline), traces=is_trace_run(summary.strategy))
        self.bubble.show_figures(summary.bubble.measured, summary.bubble.theory,
                                 summary.bubble.formula or theory_formula(summary.schedule or "gpipe", stages,
                                                                          summary.micro_batches or 1),
                                 note="\n".join(filter(None, [run_status.covers_note(summary), note,
                                                              run.timeline_note()])),
                                 why_no_theory=" ".join(theory_notes(summary.notes)))


class TimelineRow(QtWidgets.QWidget):
    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.runs = [RunTimeline(), RunTimeline()]
        self.runs[1].hide()
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        for run in self.runs:
            layout.addWidget(run, 1)

    @property
    def timeline(self) -> TimelineView:
        """The first (or only) run's timeline: the live run's, and the one File › Export offers."""
        return self.runs[0].timeline

    @property
    def bubble(self) -> BubbleBox:
        return self.runs[0].bubble

    def show_one(self) -> None:
        """One run in view (the live one, or a stored one): its timeline and bubble alone, unnamed."""
        self.runs[0].name_run(None)
        self.runs[0].bubble.set_compact(False)
        self.runs[0].timeline.set_short_title(False)
        self.runs[1].hide()
        self.runs[1].timeline.mark_devices([])

    def show_stored(self, runs: list[RunData], names: list[str]) -> None:
        """Stored runs: one run's timeline and bubble, or the first two of several side by side, named."""
        if len(runs) < COMPARED:
            self.show_one()
            self.runs[0].draw_stored(runs[0])
            return
        rest = f"curves of all {len(runs)} runs above; timelines of the first {COMPARED}" \
            if len(runs) > COMPARED else ""
        # one legend for both, unless one is read from traces: its lanes' kinds are others (engine/traces/lanes.py)
        traced = [is_trace_run((run.summary or RunSummary()).strategy) for run in runs[:COMPARED]]
        for view, run, name, trace in zip(self.runs, runs, names, traced, strict=False):
            view.name_run(name)
            view.bubble.set_compact(True, legend=view is self.runs[-1] or trace != traced[-1])
            view.timeline.set_short_title(True)
            view.draw_stored(run, rest)
            view.show()

    def compared(self) -> bool:
        return self.runs[1].isVisible()

    def mark_devices(self, devices: list[str]) -> None:
        """A finding's devices, marked on each timeline shown."""
        for view in self.runs:
            view.timeline.mark_devices(devices if view.isVisible() or view is self.runs[0] else [])

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming)
        return self.runs[0].sizeHint()


def drawn_kinds(timeline: TimelineView) -> frozenset[str]:
    """The kinds of interval the timeline draws (the bubble box's legend names some only then)."""
    return frozenset(row[2] for row in timeline.rows)
