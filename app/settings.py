"""QSettings for the app: remembered between launches.

``SPLITSCOPE_SETTINGS`` names an INI file to use instead of the platform's
store (tests and the screenshot script point it at a temporary file).
"""
from __future__ import annotations

import os

from PySide6 import QtCore

from engine.environment import variable

ORGANIZATION = "Splitscope"
APPLICATION = "Splitscope"


def make_settings(parent: QtCore.QObject | None = None) -> QtCore.QSettings:
    path = variable("SPLITSCOPE_SETTINGS")
    if path:
        return QtCore.QSettings(path, QtCore.QSettings.Format.IniFormat, parent)
    return QtCore.QSettings(ORGANIZATION, APPLICATION, parent)


def read_int(settings: QtCore.QSettings, key: str, default: int) -> int:
    value = settings.value(key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def read_str(settings: QtCore.QSettings, key: str, default: str = "") -> str:
    value = settings.value(key, default)
    return value if isinstance(value, str) else default


EXPORT_FOLDER = "export/dir"   # where a plot's save dialog opens: the folder the last export went to


def last_folder(key: str = EXPORT_FOLDER) -> str:
    """The folder a save dialog used last, if it still exists; "" otherwise (the dialog's own default)."""
    path = read_str(make_settings(), key)
    return path if path and os.path.isdir(path) else ""


def remember_folder(folder: str, key: str = EXPORT_FOLDER) -> None:
    """Keep ``folder`` for the next save dialog, in this window and the next launch (written at once:
    the window's own settings are saved when it closes, which a crash never reaches)."""
    settings = make_settings()
    settings.setValue(key, str(folder))
    settings.sync()
