"""A QProcess running ``python -m MODULE ARGS``, forked from the app's fork server when there is one.

The planner and the what-if child import torch, which takes a fresh interpreter
seconds (3.5 s here, each window's planner once). The app's fork server has it
imported already (engine/forkserver/); QProcess can only start programs, so it
starts a small relay (``python -m engine.forkserver.relay``, no torch) handed a
connection to the server: the relay has the module forked on its own standard
streams and waits for it. QProcess reads, writes and ends the child as it would
the program itself (a kill of the relay ends the child: its connection closes).
Without a server, or with one still importing (the app's start), the relay starts
the module fresh.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from PySide6 import QtCore

from engine import forkserver
from engine.forkserver import relay, server as server_imports

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is in app/services/)


def start_module(proc: QtCore.QProcess, module: str, args: list[str], title: str) -> None:
    """Start ``python -m module args`` in ``proc`` (set up by the caller: signals, channels)."""
    env = QtCore.QProcessEnvironment.systemEnvironment()
    env.insert("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), env.value("PYTHONPATH")])))
    env.insert("SPLITSCOPE_RELAY_TITLE", title)
    # The app's server lives as long as the window: what any of its children may import, once, with the first
    env.insert(relay.IMPORTS_ENV, ",".join(server_imports.WHAT_SOME_RUNS_IMPORT))
    server = forkserver.started()   # never started here: at start-up it would compete with this child
    # A server still importing would make the child wait for all of its imports (5 s and more): fresh is
    # sooner then (the app's first planner, at start-up).
    connection = forkserver.hand_over_connection() if server is not None and server.serving else None
    if connection is not None:
        # Open in the relay alone: inheritable only while QProcess starts it (Python's own children close it).
        os.set_inheritable(connection.fileno(), True)
        env.insert(forkserver.CONNECTION_ENV, str(connection.fileno()))
    else:
        env.remove(forkserver.CONNECTION_ENV)
    proc.setProgram(sys.executable)
    proc.setArguments(["-u", "-m", "engine.forkserver.relay", module, *args])
    proc.setWorkingDirectory(str(ROOT))
    proc.setProcessEnvironment(env)
    try:
        proc.start()
    finally:
        if connection is not None:
            connection.close()   # the relay's now


def end_process(proc: QtCore.QProcess | None, wait_ms: int = 2000) -> None:
    """Kill ``proc`` if it still runs (its child with it: the relay's connection closes), wait for it a moment,
    and let Qt delete it."""
    if proc is None:
        return
    if proc.state() != QtCore.QProcess.ProcessState.NotRunning:
        proc.kill()
        proc.waitForFinished(wait_ms)
    proc.deleteLater()
