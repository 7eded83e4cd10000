"""BubbleBox: the measured and the theoretical bubble beside the timeline, the formula behind the theory,
the notes that say how far to trust them, and the legend of the timeline's kinds."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.views import theme
from app.views.timeline_view import KINDS
from engine.figures import palette
from engine.measure.timing import KIND_MEANING


def _fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


class BubbleBox(QtWidgets.QFrame):
    """The measured and the theoretical bubble beside the timeline (whose rows carry each device's busy share)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("bubbleBox")
        layout = QtWidgets.QVBoxLayout(self)
        # Tight vertically: with its figures and legend counted whole it sets the timeline row's least height,
        # and the window's with it (tests/app/test_widgets.py keeps that under a 1366x768 laptop's)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.setSpacing(3)
        title = QtWidgets.QLabel("Bubble (idle share of a step)")
        title.setObjectName("sectionTitle")
        layout.addWidget(title)
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
        self.formula = QtWidgets.QLabel("")
        self.formula.setObjectName("muted")
        self.formula.setWordWrap(True)
        self.formula.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop | QtCore.Qt.AlignmentFlag.AlignLeft)
        # The formula and the notes scroll in the room the box has: a run with many notes (nodes, tensor
        # memory, a disturbance) grew the box, and the window with it past a 1280x800 screen.
        self.notes = QtWidgets.QScrollArea()
        self.notes.setObjectName("bubbleNotes")
        self.notes.setWidget(self.formula)
        self.notes.setWidgetResizable(True)
        self.notes.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.notes.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.notes.setStyleSheet("QScrollArea#bubbleNotes, QScrollArea#bubbleNotes > QWidget > QWidget "
                                 "{ background: transparent; }")   # the box's panel colour shows through
        self.notes.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Ignored)
        # Room for the formula and a line of note from the start: figures that come later do not push the box.
        self.notes.setMinimumHeight(2 * self.formula.fontMetrics().lineSpacing())   # whole lines: no sliver of a third
        layout.addWidget(self.notes, 1)
        self.legend = QtWidgets.QLabel()
        self.show_legend(split_backward=False)
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(QtCore.Qt.TextFormat.RichText)
        layout.addWidget(self.legend)
        self.setMinimumWidth(200)
        self.setMaximumWidth(280)

    def show_legend(self, split_backward: bool) -> None:
        """The kinds of interval, the zero-bubble schedules' backward halves (I, W) only when the timeline
        holds some: they would take a line from every other run's box."""
        short = {"backward-input": "I", "backward-weight": "W"}
        kinds = [k for k in KINDS if (split_backward or k not in short) and k != "eval"]   # eval: a script's, named
        # in its findings, not worth a line of every run's box
        legend = " ".join(
            f"<span style='color:{palette.kind_color(k)}'>■</span>&nbsp;{short.get(k, k)}" for k in kinds)
        legend = legend.replace("■</span>&nbsp;wait", "▬</span>&nbsp;wait")
        legend += f" <span style='color:{theme.over_panel(palette.IDLE, palette.IDLE_ALPHA)}'>■</span>&nbsp;idle"
        if legend == self.legend.text():
            return
        self.legend.setText(legend)
        self.legend.setToolTip("<br>".join(f"<b>{short.get(k, k)}</b>: {KIND_MEANING[k]}" for k in kinds)
                               + "<br><b>idle</b>: nothing timed on the device")
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
            self.legend.setMinimumHeight(self.legend.heightForWidth(width))
        need = self.layout().minimumSize().height()
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)

    def show_figures(self, measured: float | None, theory: float | None, formula: str | None = None,
                     note: str = "") -> None:
        """``formula``: the theory's formula with its values (engine.record.summary.theory_formula)."""
        self.measured.setText(_fmt_pct(measured))
        self.theory.setText(_fmt_pct(theory) if theory is not None else "n/a")
        if theory is not None:
            self.formula.setText((formula or "") + (f"\n{note}" if note else ""))
            self.formula.setToolTip("p: pipeline stages (devices); V: stages per device; m: micro-batches per step")
        else:
            self.formula.setText(note or "No pipeline bubble in theory for this strategy.")
        self._fit_height()
