"""Help › About, Documentation and Keyboard shortcuts (the actions are declared in app/actions.py).

Each opens a non-modal message box. What it says is found when it opens, not at
start-up: torch's version comes from its package metadata and ``torch/version.py``
read as text, so torch never loads into the window's process (the app's start-up
test checks it is not); the shortcuts are read from the window's actions, so the
list is the one the menus and buttons use.
"""
from __future__ import annotations

import html
import importlib.metadata
import importlib.util
import platform
import re
import tomllib
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

ROOT = Path(__file__).resolve().parent.parent   # the repository: README.md, docs/, pyproject.toml
DOCS = ("README.md", "docs/README.md", "docs/architecture.md", "docs/protocol.md", "docs/summary.md",
        "docs/store.md")


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def splitscope_version() -> str:
    """The checkout's pyproject.toml, else the installed package's (``pip install .``)."""
    try:
        return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return package_version("splitscope") or "unknown"


def torch_build() -> str | None:
    """"2.14.1+cu130, CUDA 13.0" from torch/version.py read as text (importing torch would take seconds)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return package_version("torch")
    version = re.search(r"^__version__\s*=\s*'([^']*)'", text, re.M)
    cuda = re.search(r"^cuda(?::[^=]*)?=\s*'([^']*)'", text, re.M)
    found = version.group(1) if version else package_version("torch")
    return f"{found}, CUDA {cuda.group(1)}" if cuda else f"{found}, CPU only"


def versions() -> list[tuple[str, str]]:
    """(component, version) for the About box, each found now."""
    return [("Splitscope", splitscope_version()),
            ("Python", platform.python_version()),
            ("torch", torch_build() or "not installed"),
            ("torchvision", package_version("torchvision") or "not installed"),
            ("PySide6", f"{package_version('PySide6-Essentials') or package_version('PySide6') or '?'}"
                        f" (Qt {QtCore.qVersion()})"),
            ("pyqtgraph", package_version("pyqtgraph") or "?"),
            ("numpy", package_version("numpy") or "?")]


def shortcut_rows(window: QtWidgets.QMainWindow) -> list[tuple[str, str]]:
    """(what, keys) of every action of the window and its menus that has a shortcut, in menu order."""
    seen: dict[str, str] = {}

    def visit(actions):
        for action in actions:
            if action.menu() is not None:
                visit(action.menu().actions())
            keys = action.shortcut().toString(QtGui.QKeySequence.SequenceFormat.NativeText)
            if keys:
                seen.setdefault(action.text().replace("&", ""), keys)

    visit(window.menuBar().actions())
    visit(window.actions())
    return list(seen.items())


def _table(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><td>{html.escape(a)}&nbsp;&nbsp;</td><td><b>{html.escape(b)}</b></td></tr>"
                               for a, b in rows) + "</table>"


def about_html() -> str:
    return ("<h3>Splitscope</h3><p>See how PyTorch training spreads over devices: strategies, split points, "
            "per-device utilization and idle time.</p>" + _table(versions()))


def documentation_html() -> str:
    links = "".join(f"<li><a href='{QtCore.QUrl.fromLocalFile(str(ROOT / name)).toString()}'>{name}</a></li>"
                    for name in DOCS if (ROOT / name).exists())
    return f"<p>The documentation is in the repository, at {html.escape(str(ROOT))}:</p><ul>{links}</ul>"


class HelpMenu(QtCore.QObject):
    """The Help menu's slots (app/actions.py names them "help.about", ...); ``dialog`` is the box open last."""

    def __init__(self, window: QtWidgets.QMainWindow):
        super().__init__(window)
        self.window = window
        self.dialog: QtWidgets.QMessageBox | None = None

    def about(self) -> None:
        self._show("About Splitscope", about_html())

    def documentation(self) -> None:
        self._show("Splitscope documentation", documentation_html())

    def shortcuts(self) -> None:
        self._show("Keyboard shortcuts", "<h3>Keyboard shortcuts</h3>" + _table(shortcut_rows(self.window)))

    def _show(self, title: str, text: str) -> None:
        if self.dialog is not None:
            self.dialog.close()
        box = QtWidgets.QMessageBox(self.window)
        box.setWindowTitle(title)
        box.setTextFormat(QtCore.Qt.TextFormat.RichText)
        box.setText(text)
        box.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextBrowserInteraction)  # links open
        box.setStandardButtons(QtWidgets.QMessageBox.StandardButton.Close)
        box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        box.destroyed.connect(lambda _=None, b=box: self._forget(b))
        box.open()   # not exec(): the window goes on drawing the run behind it
        self.dialog = box

    def _forget(self, box) -> None:
        if self.dialog is box:
            self.dialog = None
