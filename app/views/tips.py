"""Tooltips that wrap: Qt shows a plain-text tooltip on one line as wide as the text, and wraps rich text."""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

WRAP_AFTER = 60   # characters: shorter tips stay plain (a device's name, a file's path)


def wrapped(text: str) -> str:
    """``text`` as a tooltip Qt wraps to a readable width when it is long; its line breaks kept."""
    if len(text) <= WRAP_AFTER:
        return text
    return "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"


def add_described(combo: QtWidgets.QComboBox, text: str, data, description: str) -> None:
    """An item with its description as its tooltip, wrapped."""
    combo.addItem(text, data)
    describe(combo, combo.count() - 1, description)


def describe(combo: QtWidgets.QComboBox, index: int, description: str) -> None:
    combo.setItemData(index, wrapped(description), QtCore.Qt.ItemDataRole.ToolTipRole)
