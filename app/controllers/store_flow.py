"""StoreFlow: what the window says about its run store, and the recovery of a damaged one's runs.

The store was opened before the window was built (app/services/window_store.py);
if it was damaged and set aside, or could not be opened, the model's store notice says
so from the start and the problem area follows it. A damaged store's notice has a Recover
button: its readable runs are copied into the new store on a thread, and the history shows them.
"""
from __future__ import annotations

from PySide6 import QtCore

from app.services.window_store import StoreNotice, StoreRecovery
from app.state.app_model import AppModel


class StoreFlow(QtCore.QObject):
    def __init__(self, model: AppModel, error_panel, notice: StoreNotice | None,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model = model
        self.error_panel = error_panel
        self.recovery = StoreRecovery(model.db_path, self)
        self.recovery.sigDone.connect(self._recovered)
        self.recovery.sigFailed.connect(self._failed)
        self.error_panel.sigAction.connect(self.recover)
        model.events.store.connect(self._show_notice)
        if notice is not None:
            model.log(notice.message, level="error")
            model.set_store_notice(notice)

    @property
    def notice(self) -> StoreNotice | None:
        return self.model.store_notice

    def _show_notice(self, notice: StoreNotice | None) -> None:
        if notice is None:
            self.error_panel.hide()
            return
        self.error_panel.show_error(notice.headline or notice.message, None,
                                    "Recover runs" if notice.kept_at else None,
                                    details=notice.message if notice.headline else "")

    def recover(self) -> None:
        if self.notice is None or self.notice.kept_at is None or self.recovery.busy:
            return
        self.error_panel.set_action_enabled(False)
        self.model.set_status(f"Recovering the runs of {self.notice.kept_at}…")
        self.recovery.recover(self.notice.kept_at)

    def _recovered(self, text: str) -> None:
        self.model.set_store_notice(None)
        self.model.log(text, status=True)
        self.model.run_stored()

    def _failed(self, text: str) -> None:
        self.error_panel.set_action_enabled(True)
        self.model.log(text, status=True, level="error")
