"""StoreFlow: what the window says about its run store, and the recovery of a damaged one's runs.

The store was opened before the window was built (app/services/window_store.py);
if it was damaged and set aside, or could not be opened, the problem area says so
from the start. A damaged store's notice has a Recover button: its readable runs
are copied into the new store on a thread, and the history shows them.
"""
from __future__ import annotations

from PySide6 import QtCore

from app.services.window_store import StoreNotice, StoreRecovery


class StoreFlow(QtCore.QObject):
    def __init__(self, window, error_panel, notice: StoreNotice | None):
        super().__init__(window)
        self.window = window
        self.error_panel = error_panel
        self.notice = notice
        self.recovery = StoreRecovery(window.db_path, self)
        self.recovery.sigDone.connect(self._recovered)
        self.recovery.sigFailed.connect(self._failed)
        self.error_panel.sigAction.connect(self.recover)
        if notice is not None:
            window.log(notice.message, level="error")
            self.error_panel.show_error(notice.headline or notice.message, None,
                                        "Recover runs" if notice.kept_at else None,
                                        details=notice.message if notice.headline else "")

    def recover(self) -> None:
        if self.notice is None or self.notice.kept_at is None or self.recovery.busy:
            return
        self.error_panel.set_action_enabled(False)
        self.window.set_status(f"Recovering the runs of {self.notice.kept_at}…")
        self.recovery.recover(self.notice.kept_at)

    def _recovered(self, text: str) -> None:
        self.notice = None
        self.error_panel.hide()
        self.window.log(text, status=True)
        self.window.history.refresh()

    def _failed(self, text: str) -> None:
        self.error_panel.set_action_enabled(True)
        self.window.log(text, status=True, level="error")
