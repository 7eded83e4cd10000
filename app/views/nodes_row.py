"""NodesRow: where a run goes: this machine, or the node agents of other machines (``run --nodes``).

An empty field is this machine. Addresses of agents (``python main.py node --listen
ADDR:PORT`` on each machine) make the run span them: every node runs the Devices
above, and the token file proves the app to their agents (engine/nodes).
"""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets

from engine.nodes.token import default_token_file, new_token


class NodesRow(QtWidgets.QWidget):
    sigChanged = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self._token_file: str | None = None
        self.edit = QtWidgets.QLineEdit()
        self.edit.setObjectName("nodesEdit")
        self.edit.setPlaceholderText("this machine")
        self.edit.setClearButtonEnabled(True)
        self.edit.setToolTip("Blank: this machine. To train over several machines, start `python main.py node "
                             "--listen ADDR:PORT --token-file F` on each and list them here: "
                             "10.0.0.2:29400,10.0.0.3:29400. Every node runs the devices above; ranks go node by "
                             "node in address order.")
        self.edit.editingFinished.connect(self._typed)
        self.token_label = QtWidgets.QLabel()
        self.token_label.setObjectName("muted")
        self.token_button = QtWidgets.QPushButton("Token file…")
        self.token_button.setObjectName("tokenFileButton")
        self.token_button.setToolTip("The file with the token the nodes' agents share (readable by you alone)")
        self.token_button.clicked.connect(self._choose_token_file)
        self.new_token_button = QtWidgets.QPushButton("New token file…")
        self.new_token_button.setObjectName("newTokenFileButton")
        self.new_token_button.setToolTip("Write a fresh random token to a new file (readable by you alone), to "
                                         "copy to each node and give its agent with --token-file")
        self.new_token_button.clicked.connect(self._new_token_file)
        self.token_error = QtWidgets.QLabel()
        self.token_error.setObjectName("problem")
        self.token_error.setWordWrap(True)
        self.token_error.hide()
        token = QtWidgets.QHBoxLayout()
        token.setContentsMargins(0, 0, 0, 0)
        token.addWidget(self.token_label, 1)
        token.addWidget(self.token_button)
        token.addWidget(self.new_token_button)
        self.token_row = QtWidgets.QWidget()
        self.token_row.setLayout(token)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.edit)
        layout.addWidget(self.token_row)
        layout.addWidget(self.token_error)
        self._show_token()

    def nodes(self) -> str | None:
        return self.edit.text().strip() or None

    def token_file(self) -> str | None:
        """The token file the config takes: the chosen one while nodes are given."""
        return self._token_file if self.nodes() else None

    def chosen_token_file(self) -> str | None:
        """The file chosen (kept while the field is blank), None for the default."""
        return self._token_file

    def set_nodes(self, text: str | None) -> None:
        self.edit.setText(text or "")
        self._show_token()
        self.sigChanged.emit()

    def _typed(self) -> None:
        self._show_token()  # the token's row comes with the first node typed
        self.sigChanged.emit()

    def set_token_file(self, path: str | None) -> None:
        self._token_file = path or None
        self._show_token()
        self.sigChanged.emit()

    def _show_token(self) -> None:
        self.token_row.setVisible(bool(self.nodes()))
        path = self._token_file or str(default_token_file())
        self.token_label.setText(f"token: {Path(path).name}" + ("" if self._token_file else " (default)"))
        self.token_label.setToolTip(path)

    def _new_token_file(self, path: str | None = None) -> None:
        """Ask where (``path`` given: a test's answer), write a new token there and use it."""
        if path is None:
            start = str(Path(self._token_file or default_token_file()).parent / "splitscope-token")
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "New token file for the node agents", start)
        if not path:
            return
        try:
            new_token(path)
        except FileExistsError:
            self.token_error.setText(f"{path} exists: a token file is never overwritten; choose it with "
                                     "Token file… or pick a new name")
            self.token_error.show()
            return
        except OSError as exc:
            self.token_error.setText(f"cannot write {path}: {exc.strerror or exc}")
            self.token_error.show()
            return
        self.token_error.hide()
        self.set_token_file(path)

    def _choose_token_file(self) -> None:
        start = str(Path(self._token_file or default_token_file()).parent)
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Token file of the node agents", start)
        if path:
            self.set_token_file(path)
