"""Small layout helpers the window composes its views with."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets


def panel_title(text: str) -> QtWidgets.QLabel:
    label = QtWidgets.QLabel(text)
    label.setObjectName("panelTitle")
    return label


def column(*items: QtWidgets.QWidget | tuple[QtWidgets.QWidget, int], margins: int | tuple = 0, spacing: int = 6,
           name: str = "") -> QtWidgets.QWidget:
    """A widget holding ``items`` top to bottom, each a widget or (widget, stretch factor); ``margins``: one
    for all sides, or (left, top, right, bottom)."""
    widget = QtWidgets.QWidget()
    widget.setObjectName(name)
    layout = QtWidgets.QVBoxLayout(widget)
    layout.setContentsMargins(*(margins if isinstance(margins, tuple) else (margins,) * 4))
    layout.setSpacing(spacing)
    for item in items:
        child, stretch = item if isinstance(item, tuple) else (item, 0)
        layout.addWidget(child, stretch)
    return widget


def labelled_row(label: QtWidgets.QLabel, field: QtWidgets.QWidget) -> QtWidgets.QWidget:
    """``label`` and ``field`` on one row, the field taking the room left."""
    widget = QtWidgets.QWidget()
    row = QtWidgets.QHBoxLayout(widget)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(label)
    row.addWidget(field, 1)
    return widget


def scrolled(widget: QtWidgets.QWidget) -> QtWidgets.QScrollArea:
    area = QtWidgets.QScrollArea()
    area.setWidgetResizable(True)
    area.setWidget(widget)
    area.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
    return area


def splitter(orientation: QtCore.Qt.Orientation, *parts: tuple[QtWidgets.QWidget, int]) -> QtWidgets.QSplitter:
    """A splitter of ``parts``, each (widget, stretch factor)."""
    split = QtWidgets.QSplitter(orientation)
    for index, (widget, stretch) in enumerate(parts):
        split.addWidget(widget)
        split.setStretchFactor(index, stretch)
    return split


def tabs(*pages: tuple[QtWidgets.QWidget, str], name: str = "") -> QtWidgets.QTabWidget:
    widget = QtWidgets.QTabWidget()
    widget.setObjectName(name)
    for page, title in pages:
        widget.addTab(page, title)
    return widget
