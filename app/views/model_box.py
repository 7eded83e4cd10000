"""ModelBox: the experiment panel's model picker: the built-in models, any torchvision model, or a model file.

Choosing "torchvision model…" opens a searchable list (app/views/torchvision_picker.py) and choosing
"Open model file…" a file dialog; the model picked joins the list, and a cancelled choice goes back to
the model before it.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.views.tips import add_described, describe
from engine.models import MODELS, SPLIT_LEVELS, torchvision_name

OPEN_FILE = "__open_model_file__"
PICK_TORCHVISION = "__pick_torchvision_model__"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"   # the model files the README starts from


class ModelBox(QtWidgets.QComboBox):
    sigModelFileChosen = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("modelCombo")
        self.model_file: str | None = None
        self._loaded: dict[str, str] = {}   # per model file, the check's word: "" loaded, else why it did not
        self._last_index = 0
        # Starts the torchvision picker's list process; the window sets it (forked from the app's fork server).
        self.start_torchvision_list: Callable[[QtCore.QProcess], None] | None = None
        for name, info in MODELS.items():
            add_described(self, name, name, info.description)
        self.insertSeparator(self.count())
        add_described(self, "torchvision model…", PICK_TORCHVISION, "Any of torchvision's classification models, "
                                                                    "searchable")
        self.addItem("Open model file…", OPEN_FILE)
        self.activated.connect(self._on_activated)
        self.currentIndexChanged.connect(self._remember)

    # -- what is picked ----------------------------------------------------------------
    def choosing(self) -> bool:
        """The current item is "torchvision model…" or "Open model file…": a dialog is about to ask."""
        return self.currentData() in (OPEN_FILE, PICK_TORCHVISION)

    def is_file(self) -> bool:
        data = self.currentData()
        return isinstance(data, str) and data.startswith("file:")

    def is_torchvision(self) -> bool:
        return bool(torchvision_name(self.currentData() or ""))

    def model(self) -> str:
        """The config's model: a built-in's name, ``torchvision:NAME``, or "custom" for a file."""
        return "custom" if self.is_file() else self.currentData()

    def chosen_file(self) -> str | None:
        return self.currentData()[5:] if self.is_file() else None

    def description(self) -> str:
        data = self.currentData()
        if self.is_file():
            said = self._loaded.get(self.chosen_file())
            how = "being checked…" if said is None else f"not loaded: {said}" if said else \
                "loaded: build_model() and make_batch(batch_size, generator)"
            return f"{self.chosen_file()}\n{how}"
        if self.is_torchvision():
            return (f"torchvision's {torchvision_name(data)}, as get_model builds it (no weights): "
                    "10 classes of synthetic images; split at its named submodules")
        info = MODELS.get(data)
        return info.description if info else ""

    def take_check(self, failed: str | None) -> None:
        """The planner's check of the config: for the model file chosen, None where it loaded, else why not."""
        if self.is_file():
            self._loaded[self.chosen_file()] = failed or ""

    def _remember(self, index: int) -> None:
        if not self.choosing():
            self._last_index = index
            if self.is_file():
                self.model_file = self.chosen_file()

    # -- choosing ----------------------------------------------------------------------
    def _on_activated(self, index: int) -> None:
        if self.itemData(index) == PICK_TORCHVISION:
            self.pick_torchvision_model()
        elif self.itemData(index) == OPEN_FILE:
            # The first time, the project's examples (model files to start from); then where the last one was.
            start = str(Path(self.model_file).parent) if self.model_file else str(EXAMPLES if EXAMPLES.is_dir()
                                                                                 else Path.home())
            path, _ = QtWidgets.QFileDialog.getOpenFileName(
                self, "Open model file", start, "Python model file (*.py);;All files (*)")
            if path:
                self.set_model_file(path)
            else:
                self.setCurrentIndex(self._last_index)

    def pick_torchvision_model(self, picker=None) -> None:
        """Search torchvision's list (app/views/torchvision_picker.py) and use the model chosen."""
        from app.views.torchvision_picker import TorchvisionPicker
        own = picker is None
        picker = picker or TorchvisionPicker(self)
        picker.load(self.start_torchvision_list)
        if picker.exec() == QtWidgets.QDialog.DialogCode.Accepted and picker.chosen():
            self.set_torchvision_model(picker.chosen())
        else:
            self.setCurrentIndex(self._last_index)
        if own:
            picker.deleteLater()

    def set_torchvision_model(self, model: str) -> None:
        """Use ``torchvision:NAME``: added to the list, above its "torchvision model…" entry."""
        idx = self.findData(model)
        if idx < 0:
            idx = self.findData(PICK_TORCHVISION)
            self.insertItem(idx, f"torchvision: {torchvision_name(model)}", model)
            describe(self, idx, f"torchvision's own {torchvision_name(model)} (get_model, no weights)")
        self.setCurrentIndex(idx)

    def open_model_file(self) -> None:
        """File › Open model file…: as choosing "Open model file…" in the list."""
        index = self.findData(OPEN_FILE)
        self.setCurrentIndex(index)
        self._on_activated(index)

    def set_model_file(self, path: str) -> None:
        """Use a model file: it defines build_model() and make_batch(batch_size, generator)."""
        self.model_file = os.path.abspath(path)
        idx = self.findData(f"file:{self.model_file}")
        if idx < 0:
            self.insertItem(self.count() - 1, f"file: {Path(path).name}", f"file:{self.model_file}")
            idx = self.count() - 2
            self.setItemData(idx, self.model_file, QtCore.Qt.ItemDataRole.ToolTipRole)
        self.setCurrentIndex(idx)
        self.sigModelFileChosen.emit(self.model_file)


def split_level_text(level: int, block_names: list[str] | None = None) -> str:
    """The split level's words, with the model's own blocks where known ("the model's children (conv1 … fc)"),
    not another model's example (layer3 is a ResNet's)."""
    words = SPLIT_LEVELS[level].split(" (")[0]
    if not block_names:
        return words
    shown = block_names if len(block_names) <= 2 else [block_names[0], "…", block_names[-1]]
    return f"{words} ({' '.join(shown)})"
