"""BubbleBox: the measured and the theoretical bubble beside the timeline, the formula behind the theory and the
steps they cover, and the legend of the timeline's kinds (the findings and notes: app/views/findings_panel.py)."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.views import theme
from app.views.elided_label import ElidedLabel
from engine.figures import palette
from engine.measure.timing import KIND_MEANING, KINDS, WAIT_KINDS
from engine.traces.lanes import IDLE_LANE_KINDS, LANE_KINDS, LANE_MEANING

TITLE = "Bubble (idle share of a step)"
WIDTH = 260   # px: the formula on a line, the legend on two
COMPACT_WIDTH = 200   # px: beside another run's box, under the runs compared (the legend in one box of the two)


def _fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


WHEN_DRAWN = frozenset({"backward-input", "backward-weight", "data-wait"})   # named when a run has them

class BubbleBox(QtWidgets.QFrame):
    """The measured and the theoretical bubble beside the timeline (whose rows carry each device's busy share)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("bubbleBox")
        layout = QtWidgets.QVBoxLayout(self)
        # Tight vertically: with its figures and legend counted whole it sets the timeline row's least height,
        # and the window's with it (tests/app/test_widgets.py keeps that under a 1366x768 laptop's)
        layout.setContentsMargins(10, 4, 10, 4)
        layout.setSpacing(2)
        self.title = ElidedLabel(TITLE)   # a compared run's name may be long: cut, whole in its tooltip
        self.title.setObjectName("sectionTitle")
        layout.addWidget(self.title)
        grid = QtWidgets.QGridLayout()
        grid.setHorizontalSpacing(12)
        self.measured = QtWidgets.QLabel("—")
        self.measured.setObjectName("bigFigure")
        self.theory = QtWidgets.QLabel("—")
        self.theory.setObjectName("bigFigure")
        grid.addWidget(QtWidgets.QLabel("measured"), 0, 0)
        grid.addWidget(QtWidgets.QLabel("theory"), 0, 1)
        grid.addWidget(self.measured, 1, 0)
        grid.addWidget(self.theory, 1, 1)
        layout.addLayout(grid)
        # The formula, and which steps the figures cover: what a finding or a note says is the findings panel's
        # (app/views/findings_panel.py), so the box keeps its height whatever the run says.
        self.formula = QtWidgets.QLabel("")
        self.formula.setObjectName("muted")
        self.formula.setWordWrap(True)
        self.formula.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop | QtCore.Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.formula, 1)
        self.legend = QtWidgets.QLabel()
        self.show_legend()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(QtCore.Qt.TextFormat.RichText)
        layout.addWidget(self.legend)
        self.width_hint = WIDTH
        self.setMinimumWidth(COMPACT_WIDTH)
        self.setMaximumWidth(280)
        # One width whatever its text: a box whose width followed its words moved the timeline beside it, and
        # each move repainted the timeline twice in a step.
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Fixed, QtWidgets.QSizePolicy.Policy.Preferred)

    def name_run(self, name: str | None) -> None:
        """Whose bubble it is, where several runs are compared side by side (None: the one run's)."""
        self.title.setText(f"Bubble of {name}" if name else TITLE)

    def show_legend(self, drawn: frozenset[str] = frozenset(), traces: bool = False) -> None:
        """The kinds of interval; those of some runs only (the zero-bubble schedules' backward halves I and W, a
        wait on DataLoader workers) only when the timeline draws some (``drawn``): each would take a line from
        every other run's box. ``traces``: a run read from profiler traces, whose lanes are kernels by type and
        idle gaps by cause (engine/traces/lanes.py)."""
        short = {"backward-input": "I", "backward-weight": "W"}
        if traces:
            kinds, meaning, thin = list(LANE_KINDS), LANE_MEANING, set(IDLE_LANE_KINDS.values())
        else:   # eval: a script's, named in its findings, not worth a line of every run's box
            kinds = [k for k in KINDS if (k not in WHEN_DRAWN or k in drawn) and k != "eval"]
            meaning, thin = KIND_MEANING, set(WAIT_KINDS)
        legend = " ".join(f"<span style='color:{palette.kind_color(k)}'>{'▬' if k in thin else '■'}</span>"
                          f"&nbsp;{short.get(k, k)}" for k in kinds)
        legend += f" <span style='color:{theme.over_panel(palette.IDLE, palette.IDLE_ALPHA)}'>■</span>&nbsp;idle"
        if legend == self.legend.text():
            return
        self.legend.setText(legend)
        self.legend.setToolTip("<br>".join(f"<b>{short.get(k, k)}</b>: {meaning[k]}" for k in kinds)
                               + "<br><b>idle</b>: nothing timed on the device")
        self._fit_height()

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming)
        return QtCore.QSize(self.width_hint, super().sizeHint().height())

    def set_compact(self, compact: bool, legend: bool = True) -> None:
        """Narrower, for two runs side by side (their timelines need the room); ``legend``: this box shows it."""
        self.width_hint = COMPACT_WIDTH if compact else WIDTH
        self.legend.setVisible(legend or not compact)
        self.updateGeometry()
        self._fit_height()

    def hasHeightForWidth(self) -> bool:  # noqa: N802  (Qt naming)
        # Its wrapped labels would make the panel's layout height-for-width, and Qt then
        # squeezed the plot rows above into each other on short screens (1366x768).
        # Instead the box asks for its wrapped height as its minimum (_fit_height).
        return False

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit_height()

    def _fit_height(self) -> None:
        # What the box needs is its layout's minimum once the big figures count at their polished height (their
        # font comes from the style sheet, after the layout first measured them) and the legend at its wrapped
        # height: at 1280x800 the figures were cut in half and the notes drawn over them.
        for figure in (self.measured, self.theory):
            figure.setMinimumHeight(figure.sizeHint().height())
        margins = self.layout().contentsMargins()
        width = self.contentsRect().width() - margins.left() - margins.right()   # inside the frame's border
        if width > 0:
            for label in (self.formula, self.legend):
                label.setMinimumHeight(max(0, label.heightForWidth(width)) if label.isVisibleTo(self) else 0)
        need = self.layout().minimumSize().height()
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)

    def show_figures(self, measured: float | None, theory: float | None, formula: str | None = None,
                     note: str = "", why_no_theory: str = "") -> None:
        """``formula``: the theory's formula with its values (engine.record.summary.theory_formula); ``note``: which
        steps the figures cover; ``why_no_theory``: why no formula holds, where none does (its tooltip: it runs to
        several lines, which the box has no room for)."""
        self.measured.setText(_fmt_pct(measured))
        self.theory.setText(_fmt_pct(theory) if theory is not None else "n/a")
        if theory is not None:
            self.formula.setText((formula or "") + (f"\n{note}" if note else ""))
            self.formula.setToolTip("p: pipeline stages (devices); V: stages per device; m: micro-batches per step")
        else:
            said = "No formula holds for this run (hover here for why)." if why_no_theory else \
                "No pipeline bubble in theory for this strategy."
            self.formula.setText(said + (f"\n{note}" if note else ""))
            self.formula.setToolTip(why_no_theory)
        self._fit_height()
