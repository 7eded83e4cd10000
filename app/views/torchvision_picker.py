"""TorchvisionPicker: search torchvision's classification models and pick one.

The list is what torchvision itself lists (``main.py models --torchvision
--json``), read in a child process the window forks from the app's fork server
where it serves (torchvision imported there already): torch stays out of the app's own process
and the dialog answers while the list loads. Each row says the model's size and
the image size its weights were trained at.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6 import QtCore, QtWidgets

from app.state.number_formats import human_count
from engine.models import TORCHVISION
from engine.wire import codec

LIST_ARGS = ["models", "--torchvision", "--json"]  # what the process given to load() runs: main.py ARGS


class TorchvisionPicker(QtWidgets.QDialog):
    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Choose a torchvision model")
        self.resize(420, 480)
        layout = QtWidgets.QVBoxLayout(self)
        self.search = QtWidgets.QLineEdit()
        self.search.setObjectName("torchvisionSearch")
        self.search.setPlaceholderText("Search (resnet, vit, mobilenet…)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._filter)
        layout.addWidget(self.search)
        self.list = QtWidgets.QListWidget()
        self.list.setObjectName("torchvisionList")
        self.list.itemDoubleClicked.connect(lambda _item: self.accept())
        self.list.currentItemChanged.connect(lambda *_: self._update_ok())
        layout.addWidget(self.list, 1)
        self.status = QtWidgets.QLabel("Reading torchvision's list…")
        self.status.setObjectName("muted")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.ok_button = buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok)
        layout.addWidget(buttons)
        self._process: QtCore.QProcess | None = None
        self._update_ok()

    # -- the list ----------------------------------------------------------------------
    def load(self, start: Callable[[QtCore.QProcess], None]) -> None:
        """Ask torchvision for its list, in a child process that ``start`` starts (``main.py`` LIST_ARGS: the
        window's forks it where the app's fork server serves, torchvision imported already); the rows arrive
        through the event loop. Once loading or loaded, nothing more."""
        if self._process is not None or self.list.count():
            return
        proc = QtCore.QProcess(self)
        proc.finished.connect(self._on_finished)
        proc.errorOccurred.connect(self._on_error)
        self._process = proc
        start(proc)

    def _on_error(self, error) -> None:
        if error == QtCore.QProcess.ProcessError.FailedToStart:
            self._process = None
            self.status.setText(f"Could not start {sys.executable} to read torchvision's list.")

    def _on_finished(self, code: int, _status) -> None:
        proc, self._process = self._process, None
        if proc is None:
            return
        try:
            rows = codec.loads(bytes(proc.readAllStandardOutput()).decode(), "the torchvision list")
        except ValueError:   # codec.WireError is one
            why = bytes(proc.readAllStandardError()).decode().strip().splitlines()
            self.status.setText(f"Could not read torchvision's list: {why[-1] if why else f'exit status {code}'}")
            return
        self.set_rows(rows)

    def set_rows(self, rows: list[dict]) -> None:
        """Rows as ``models --torchvision --json`` gives them: name, params, image_size, min_size."""
        self.list.clear()
        for row in rows:
            short = row["name"].removeprefix(TORCHVISION)
            item = QtWidgets.QListWidgetItem(f"{short}   {human_count(row['params'])} params · {row['image_size']} px")
            item.setData(QtCore.Qt.ItemDataRole.UserRole, row["name"])
            item.setToolTip(f"--model {row['name']}: images of {row['image_size']}x{row['image_size']} as its "
                            f"weights were trained (at least {row['min_size']}); --image-size makes them smaller")
            self.list.addItem(item)
        self.status.setText(f"{len(rows)} classification models, built as torchvision builds them (no weights "
                            "loaded), 10 classes of synthetic images.")
        self._filter(self.search.text())

    def _filter(self, text: str) -> None:
        words = text.lower().split()
        first_visible = None
        for i in range(self.list.count()):
            item = self.list.item(i)
            hidden = not all(w in item.text().lower() for w in words)
            item.setHidden(hidden)
            if not hidden and first_visible is None:
                first_visible = item
        if self.list.currentItem() is None or self.list.currentItem().isHidden():
            self.list.setCurrentItem(first_visible)
        self._update_ok()

    def _update_ok(self) -> None:
        item = self.list.currentItem()
        self.ok_button.setEnabled(item is not None and not item.isHidden())

    def chosen(self) -> str | None:
        """``torchvision:NAME`` of the chosen model."""
        item = self.list.currentItem()
        return item.data(QtCore.Qt.ItemDataRole.UserRole) if item is not None and not item.isHidden() else None

    def done(self, result: int) -> None:  # noqa: D401  (Qt's name) a closed dialog leaves no child behind
        if self._process is not None:
            self._process.kill()
            self._process.waitForFinished(1000)
            self._process = None
        super().done(result)
