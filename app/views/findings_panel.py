"""FindingsPanel: what a run's figures say, under the plots: a line per finding, most of the step first
(app/state/finding_rows.py), then what to know to read them.

The panel is as tall as its first three rows at its width (up to ``MOST_LINES`` lines of text), so at 1280x800 the
top three read without scrolling; the rest scroll. Hovering a row names its devices (``sigDevicesHovered``: the
plots and the timeline highlight them); its "why" link names the figure it comes from (``sigWhy``).
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.state.finding_rows import FindingRow
from app.views import theme

SHOWN_WHOLE = 3     # rows that read without scrolling
MOST_LINES = 6      # the panel's height at most, in lines of text (a long finding wraps to two or three)
LEAST_LINES = 2     # and at least, where the window is short (a 1366x768 laptop's): the plots keep their room
SEVERITY_COLORS = {"problem": theme.ERROR, "warning": theme.WARNING, "info": theme.MUTED}


class FindingRowView(QtWidgets.QWidget):
    """One row: a dot in its severity's colour, the words, and a "why" link where the figure is known."""
    sigHovered = QtCore.Signal(list)   # its devices on entering; [] on leaving
    sigWhy = QtCore.Signal(str)        # the figure's name

    def __init__(self, row: FindingRow, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.row = row
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(0, 1, 0, 1)
        layout.setSpacing(6)
        dot = QtWidgets.QLabel("●")
        dot.setStyleSheet(f"color: {SEVERITY_COLORS.get(row.severity, theme.MUTED)};")
        dot.setToolTip(f"{row.severity} ({row.code})")
        dot.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop)
        layout.addWidget(dot)
        self.text = QtWidgets.QLabel(row.text)
        self.text.setObjectName("findingText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(QtCore.Qt.TextFormat.PlainText)
        self.text.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
        layout.addWidget(self.text, 1)
        self.why = QtWidgets.QLabel(f"<a href='why' style='color:{theme.MUTED}'>why</a>" if row.why else "")
        self.why.setObjectName("findingWhy")
        self.why.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop)
        if row.why is not None:
            self.why.setToolTip(f"From {row.why.words}")
            self.why.linkActivated.connect(lambda _link: self.sigWhy.emit(row.why.figure))
        layout.addWidget(self.why)

    def height_at(self, width: int) -> int:
        """The row's height at ``width``: its words wrapped."""
        margins = self.layout().contentsMargins()
        others = sum(w.sizeHint().width() for w in (self.layout().itemAt(0).widget(), self.why))
        text_width = max(40, width - others - 2 * self.layout().spacing())
        return self.text.heightForWidth(text_width) + margins.top() + margins.bottom()

    def enterEvent(self, event) -> None:  # noqa: N802  (Qt naming)
        super().enterEvent(event)
        self.sigHovered.emit(list(self.row.devices))

    def leaveEvent(self, event) -> None:  # noqa: N802
        super().leaveEvent(event)
        self.sigHovered.emit([])


class FindingsPanel(QtWidgets.QFrame):
    sigDevicesHovered = QtCore.Signal(list)   # the hovered row's devices; [] when none is hovered
    sigWhy = QtCore.Signal(str)               # the figure a row's "why" names

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("findingsPanel")
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.setSpacing(8)
        title = QtWidgets.QLabel("Findings")
        title.setObjectName("sectionTitle")
        title.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop)
        layout.addWidget(title)
        self.scroll = QtWidgets.QScrollArea()
        self.scroll.setObjectName("findingsScroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body = QtWidgets.QWidget()
        self.rows_layout = QtWidgets.QVBoxLayout(self.body)
        self.rows_layout.setContentsMargins(0, 0, 6, 0)   # the "why" links clear of the scroll bar
        self.rows_layout.setSpacing(1)
        self.rows_layout.addStretch(1)
        self.scroll.setWidget(self.body)
        layout.addWidget(self.scroll, 1)
        self.views: list[FindingRowView] = []
        self.rows: list[FindingRow] = []
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Maximum)
        self.hide()

    def show_rows(self, rows: list[FindingRow]) -> None:
        """The rows, in order (hidden when there are none); the same rows again change nothing."""
        if rows == self.rows:
            return
        self.rows = list(rows)
        for view in self.views:
            self.rows_layout.removeWidget(view)
            view.deleteLater()
        self.views = []
        for row in rows:
            view = FindingRowView(row)
            view.sigHovered.connect(self.sigDevicesHovered)
            view.sigWhy.connect(self.sigWhy)
            self.rows_layout.insertWidget(self.rows_layout.count() - 1, view)
            self.views.append(view)
        self.setVisible(bool(rows))
        self.scroll.verticalScrollBar().setValue(0)
        self._fit_height()

    def texts(self) -> list[str]:
        return [row.text for row in self.rows]

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit_height()

    def _fit_height(self) -> None:
        """As tall as the first SHOWN_WHOLE rows at the panel's width (MOST_LINES lines at most), and no taller;
        on a short screen it gives way to the plots, down to LEAST_LINES (the rest scroll)."""
        if not self.views:
            return
        width = self.scroll.viewport().width() or self.scroll.width()
        spacing = self.rows_layout.spacing()
        need = sum(view.height_at(width) for view in self.views[:SHOWN_WHOLE]) + spacing * (SHOWN_WHOLE - 1)
        line = self.fontMetrics().lineSpacing()
        margins = self.layout().contentsMargins()
        frame = margins.top() + margins.bottom() + 2 * self.frameWidth()
        fitted = min(need, MOST_LINES * line + 8) + frame
        least = min(fitted, LEAST_LINES * line + frame)
        if (fitted, least) != (self.maximumHeight(), self.minimumHeight()):
            self.setMaximumHeight(fitted)
            self.setMinimumHeight(least)
            self.updateGeometry()

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802  (Qt naming)
        return QtCore.QSize(super().sizeHint().width(), self.maximumHeight() if self.views else 0)

    def first_row_in_view(self) -> bool:
        """Whether the first row shows whole, not scrolled away or cut (what the tests ask)."""
        if not self.views:
            return False
        view = self.views[0]
        top_left = view.mapTo(self.scroll.viewport(), QtCore.QPoint(0, 0))
        shown = self.scroll.viewport().rect()
        return shown.contains(top_left) and top_left.y() + view.height() <= shown.height()
