"""The QApplication, its look, and the event loop (``app.launch`` calls ``run_app``)."""
from __future__ import annotations

import gc
import sys
import time

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.views import theme
from engine.environment import variable
from engine.wire import codec


def dark_palette() -> QtGui.QPalette:
    p = QtGui.QPalette()
    c = QtGui.QColor
    role = QtGui.QPalette.ColorRole
    p.setColor(role.Window, c(theme.BACKGROUND))
    p.setColor(role.WindowText, c(theme.FOREGROUND))
    p.setColor(role.Base, c("#0f1216"))
    p.setColor(role.AlternateBase, c("#171b21"))
    p.setColor(role.ToolTipBase, c("#22272e"))
    p.setColor(role.ToolTipText, c(theme.FOREGROUND))
    p.setColor(role.Text, c(theme.FOREGROUND))
    p.setColor(role.Button, c("#22272e"))
    p.setColor(role.ButtonText, c(theme.FOREGROUND))
    p.setColor(role.BrightText, c("#ffffff"))
    p.setColor(role.Highlight, c("#2f6feb"))
    p.setColor(role.HighlightedText, c("#ffffff"))
    p.setColor(role.PlaceholderText, c(theme.MUTED))
    p.setColor(role.Link, c("#58a6ff"))
    for r in (role.WindowText, role.Text, role.ButtonText):
        p.setColor(QtGui.QPalette.ColorGroup.Disabled, r, c("#5b636d"))
    return p


def configure(app: QtWidgets.QApplication) -> None:
    app.setApplicationName("Splitscope")
    app.setOrganizationName("Splitscope")
    app.setApplicationDisplayName("Splitscope")
    # Each of these re-polishes every widget alive: set only what differs (the tests configure the one
    # QApplication for each of hundreds of tests, and the repolishing took most of their time).
    if app.property("splitscope_style") != "Fusion":  # style() is the style sheet's proxy once one is set
        app.setStyle("Fusion")
        app.setProperty("splitscope_style", "Fusion")
    palette = dark_palette()
    if app.palette() != palette:
        app.setPalette(palette)
    sheet = theme.style_sheet()
    if app.styleSheet() != sheet:
        app.setStyleSheet(sheet)
    app.setWindowIcon(QtGui.QIcon(theme.icon_path("splitscope.svg")))
    # Antialiased curves look better and cost little at our point counts (peak downsampling
    # keeps them near one point per pixel column).
    pg.setConfigOptions(antialias=True, foreground=theme.MUTED, background=theme.PANEL)


def keep_start_up_objects_out_of_collections() -> None:
    """Once the window is up, what exists (modules, classes, Qt wrappers: most of the heap) lives as long
    as the app. ``gc.freeze`` moves it out of the cyclic collector's reach, so a full collection scans
    only what was made since: measured in the soak (tests/soak/test_long_run.py), a full collection
    otherwise paused the UI thread for 150 to 250 ms about once a minute during a fast run."""
    gc.collect()
    gc.freeze()


def run_app(argv: list[str], t_start: float) -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0], *argv])
    from app.services.planner_client import PlannerClient
    PlannerClient.start_early()   # its torch import overlaps the window's construction; the window takes it
    configure(app)
    from app.main_window import MainWindow
    window = MainWindow()
    window.show()
    report: dict = {}

    def shown():
        report["shown_s"] = round(time.perf_counter() - t_start, 3)
        report["shown_at_unix"] = time.time()  # the caller compares with its own launch time
        report["torch_imported"] = "torch" in sys.modules
        report["title"] = window.windowTitle()
        keep_start_up_objects_out_of_collections()
        run_ready()   # clickable from the first paint on when nothing holds it back

    QtCore.QTimer.singleShot(0, shown)

    def run_ready():   # the first moment Run can be clicked (a click before the planner's check waits for it)
        if window.run_action.isEnabled() and "shown_s" in report and "run_ready_s" not in report:
            report["run_ready_s"] = round(time.perf_counter() - t_start, 3)
            report["run_ready_at_unix"] = time.time()

    def checked(plan):   # the planner's first answer: a click on Run starts the run at once from now
        if plan.check != "pending" and "checked_at_unix" not in report:
            report["checked_s"] = round(time.perf_counter() - t_start, 3)
            report["checked_at_unix"] = time.time()
    window.run_action.changed.connect(run_ready)
    window.model.events.plan.connect(checked)
    quit_after = variable("SPLITSCOPE_QUIT_AFTER_MS")
    if quit_after:
        def quit_now():
            report["torch_imported_at_quit"] = "torch" in sys.modules
            window.closing.quit_without_asking()  # the last window closing ends the loop
        QtCore.QTimer.singleShot(int(quit_after), quit_now)
    app.aboutToQuit.connect(window.shutdown)
    rc = app.exec()
    # After the loop: a run still going (a forced close) is stopped and reaped here.
    window.shutdown()
    if quit_after:
        print(codec.dumps({"splitscope_app": report}, compact=False), file=sys.stderr, flush=True)
    return rc
