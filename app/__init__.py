"""Splitscope's desktop app (PySide6 + pyqtgraph). The only Qt code of the project.

``launch(argv)`` creates the QApplication, shows the main window and runs the
event loop. Nothing here imports torch: validation and block profiling run in
the planner process (app.services.planner_service), training in the engine's worker.

Environment knobs (tests, the screenshot script, benchmarks):

- ``SPLITSCOPE_QUIT_AFTER_MS``: quit the app this long after the window shows,
  and print one JSON line to stderr with the start-up figures.
- ``SPLITSCOPE_SETTINGS``: an INI file for QSettings instead of the user's store.
- ``SPLITSCOPE_DB``: the run store (the engine's own override).
"""
from __future__ import annotations

import time

_T_IMPORT = time.perf_counter()


def launch(argv: list[str] | None = None) -> int:
    from engine.store import serve_from_child, start_store_process
    # The window's stores live in the store process (docs/store.md); it imports while Qt does.
    serve_from_child()
    start_store_process()
    from app.application import run_app
    from engine.run.validate import validate_in_child
    # An experiment's points are checked on its thread; the checks import torch, which must not
    # load into the window's process (it holds the interpreter for seconds): in a child instead.
    validate_in_child()
    return run_app(list(argv or []), t_start=_T_IMPORT)


__all__ = ["launch"]
