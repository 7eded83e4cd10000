"""The window's actions and menus, declared in one place.

Each action is data: its text, shortcut, tip and the window's method it calls, so
the menus can be read here at a glance and what an action does is a method that a
test can call without the menu. ``install`` builds the menu bar from them. A slot
may name a helper of the window ("help.about": ``window.help.about``).
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from PySide6 import QtCore, QtGui, QtWidgets

Pixmap = QtWidgets.QStyle.StandardPixmap


@dataclass(frozen=True)
class Action:
    text: str
    slot: str                    # the window's method that the action calls ("help.about": a helper's)
    shortcut: str | None = None  # a QKeySequence string
    tip: str = ""
    icon: Pixmap | None = None


RUN = Action("Run", "start_run", "Ctrl+R", "Run the experiment (Ctrl+R)", Pixmap.SP_MediaPlay)
STOP = Action("Stop", "stop_run", "Esc", "Stop the run (Esc)", Pixmap.SP_MediaStop)
ADVISE = Action("Advise", "advise.start", "Ctrl+Shift+A",
                "The best way to spread the form's model over its devices: every strategy, schedule and split "
                "predicted, the best few checked by short runs (as main.py advise; Ctrl+Shift+A)",
                Pixmap.SP_FileDialogDetailedView)
OPEN_MODEL = Action("Open model file…", "experiment.model_combo.open_model_file",
                    tip="A Python file defining build_model() and make_batch()")
OPEN_TRACES = Action("Open traces…", "traces.open_folder", "Ctrl+Shift+O",
                     "A folder of a job's PyTorch profiler traces, a file per rank: opened as a run of kind trace")
OPEN_TRACE_FILES = Action("Open trace files…", "traces.open_files",
                          tip="A job's profiler trace files (.json, .json.gz), a file per rank: opened as a run")
OPEN_RUN_TRACES = Action("Open the run's profiler traces", "traces.open_selected_run",
                         tip="The traces the selected run recorded (--profile-steps): its kernels, or its ops on a "
                             "CPU, read as a run of kind trace and compared with it")
WATCH = Action("Watch a script…", "runs.watch_script", "Ctrl+Shift+W",
               "Run your own training script, unmodified, and watch each device (as main.py watch)")
QUIT = Action("Quit", "close", "Ctrl+Q")
BACK_TO_LIVE = Action("Back to live", "back_to_live", tip="This machine's telemetry and the current run")
REFRESH_HISTORY = Action("Refresh history", "history.refresh", "F5")
EXPERIMENT_RESULT = Action("Experiment result", "center.show_result_view",
                           tip="The result of the experiment last shown")
SHORTCUTS = Action("Keyboard shortcuts", "help.shortcuts", "F1", "Every shortcut of the window (F1)")
DOCUMENTATION = Action("Documentation", "help.documentation", tip="README.md and docs/ in the repository")
ABOUT = Action("About Splitscope", "help.about", tip="Splitscope's version, and torch's and Qt's it runs with")


def make(window: QtWidgets.QMainWindow, spec: Action) -> QtGui.QAction:
    icon = window.style().standardIcon(spec.icon) if spec.icon is not None else QtGui.QIcon()
    action = QtGui.QAction(icon, spec.text, window)
    if spec.shortcut:
        action.setShortcut(QtGui.QKeySequence(spec.shortcut))
    if spec.tip:
        action.setToolTip(spec.tip)
        action.setStatusTip(spec.tip)
    method = attrgetter(spec.slot)
    action.triggered.connect(lambda _checked=False: method(window)())
    return action


def run_actions(window: QtWidgets.QMainWindow) -> tuple[QtGui.QAction, QtGui.QAction, QtGui.QAction]:
    """Run, Stop and Watch a script…: their shortcuts work wherever the focus is in the window."""
    run, stop, watch = make(window, RUN), make(window, STOP), make(window, WATCH)
    for action in (run, stop, watch):
        action.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
        window.addAction(action)
    return run, stop, watch


def advise_action(window: QtWidgets.QMainWindow) -> QtGui.QAction:
    """Advise, beside Run: its shortcut works wherever the focus is in the window, as Run's."""
    action = make(window, ADVISE)
    action.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
    window.addAction(action)
    return action


def install(window: QtWidgets.QMainWindow, run: QtGui.QAction, stop: QtGui.QAction, watch: QtGui.QAction,
            report_actions: list[QtGui.QAction], plot_actions: dict[str, list[QtGui.QAction]],
            experiments_menu: QtWidgets.QMenu, advise: QtGui.QAction | None = None) -> QtWidgets.QMenu:
    """File, Run, Experiments, View and Help; returns File › Export (its report formats, then one submenu per
    plot)."""
    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    file_menu.addAction(make(window, OPEN_MODEL))
    for spec in (OPEN_TRACES, OPEN_TRACE_FILES, OPEN_RUN_TRACES):   # profiler traces (app/controllers/trace_flow.py)
        file_menu.addAction(make(window, spec))
    file_menu.addSeparator()
    # The selected run or experiment through engine.export, or one plot's figure, drawn by the same backend.
    export_menu = file_menu.addMenu("&Export")
    export_menu.setToolTipsVisible(True)
    for action in report_actions:
        export_menu.addAction(action)
    export_menu.addSeparator()
    for name, actions in plot_actions.items():
        sub = export_menu.addMenu(f"Plot: {name}")
        for action in actions:
            sub.addAction(action)
    file_menu.addSeparator()
    file_menu.addAction(make(window, QUIT))
    run_menu = bar.addMenu("&Run")
    run_menu.addAction(run)
    if advise is not None:
        run_menu.addAction(advise)
    run_menu.addAction(stop)
    run_menu.addSeparator()
    run_menu.addAction(watch)
    bar.addMenu(experiments_menu)
    view = bar.addMenu("&View")
    for spec in (BACK_TO_LIVE, REFRESH_HISTORY, EXPERIMENT_RESULT):
        view.addAction(make(window, spec))
    help_menu = bar.addMenu("&Help")
    for spec in (SHORTCUTS, DOCUMENTATION, ABOUT):
        help_menu.addAction(make(window, spec))
    return export_menu
