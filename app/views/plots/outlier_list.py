"""OutlierList: the devices to look at first in a run of many, ranked (engine/record/outliers.py).

Shown beside the plots once a run has HEATMAP_FROM devices or more (engine/figures/heatmap.py): the
straggler, the devices that idle or wait most on communication or input, those holding the most memory,
each with its share. A click picks the device: the panel highlights it in the heatmaps and the timeline
(``sigDeviceClicked``); a second click lets it go.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from engine.record.outliers import Outlier

WIDTH = 220   # px: the list's lines wrap inside it


class OutlierList(QtWidgets.QWidget):
    sigDeviceClicked = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        title = QtWidgets.QLabel("Look here first")
        title.setObjectName("sectionTitle")
        title.setToolTip("The devices that idle or wait most, the straggler the others wait for, and those "
                         "holding the most memory: from the last steps' timeline and the memory samples")
        layout.addWidget(title)
        self.list = QtWidgets.QListWidget()
        self.list.setWordWrap(True)
        self.list.setUniformItemSizes(False)
        self.list.itemClicked.connect(self._clicked)
        layout.addWidget(self.list, 1)
        self.setFixedWidth(WIDTH)
        self.outliers: list[Outlier] = []
        self.otherwise = ""
        self.picked: str | None = None

    def show_outliers(self, outliers: list[Outlier], otherwise: str = "") -> None:
        """The ranked lines; ``otherwise``: what to say when no device stands out."""
        if (outliers, otherwise) == (self.outliers, self.otherwise) and self.list.count():
            return
        self.outliers, self.otherwise = list(outliers), otherwise
        self.list.clear()
        for outlier in outliers:
            item = QtWidgets.QListWidgetItem(outlier.text)
            item.setData(QtCore.Qt.ItemDataRole.UserRole, outlier.device)
            item.setToolTip(outlier.text + "\nClick to highlight it in the heatmaps and the timeline")
            self.list.addItem(item)
        if not outliers:
            self.list.addItem(otherwise or "no device stands out in the last steps")
        self.pick(self.picked)

    def texts(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def pick(self, device: str | None) -> None:
        """Select ``device``'s first line (None: none), without announcing it."""
        self.picked = device or None
        self.list.blockSignals(True)
        self.list.clearSelection()
        for i in range(self.list.count()):
            if device and self.list.item(i).data(QtCore.Qt.ItemDataRole.UserRole) == device:
                self.list.setCurrentRow(i)
                break
        self.list.blockSignals(False)

    def _clicked(self, item: QtWidgets.QListWidgetItem) -> None:
        device = item.data(QtCore.Qt.ItemDataRole.UserRole)
        if device is None:
            return
        device = None if device == self.picked else device
        self.pick(device)
        self.sigDeviceClicked.emit(device or "")
