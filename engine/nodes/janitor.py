"""A node agent's working folder, removed when the agent ends however it ends, SIGKILL included.

The agent keeps its runs' folders (the ranks' socket, the files that travelled,
torchrun's logs: engine.nodes.node_run) in one folder of its own. It removes it
when it stops; a SIGKILL (the OOM killer, ``kill -9``) gives it no chance to, and
the folder stayed (issue 52). So a small watcher process holds the read end of a
pipe whose write end only the agent holds: when the agent's process ends, the kernel
closes that end whatever killed it, the watcher reads end-of-file, removes the
folder and exits. Chosen over sweeping stale folders when the next agent starts: that
needs a next start (on a node that may never see one), and a pid check that a reused
pid can fool; end-of-file on a pipe needs neither.

The watcher is this file run as a script (``python -I -S janitor.py FOLDER``): the
standard library alone, nothing of the engine, so it starts in tens of milliseconds.
It is in a session of its own, so that a signal to the agent's process group (a
terminal's Ctrl-C, a test's killpg) reaches the agent, which cleans up itself, and
not the watcher before the agent is done.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REMOVE_FOR_S = 10.0   # what the agent's torchrun and ranks may still write there as they die: tried again until then
WATCHER_WAIT_S = 10.0


class WorkFolder:
    """``path``: a private folder (0700) that outlives neither ``close()`` nor the process that made it."""

    def __init__(self, prefix: str = "splitscope-agent-"):
        self.path = tempfile.mkdtemp(prefix=prefix)
        try:
            # The pipe's write end is the Popen's stdin, held by this process alone: Popen's children get no
            # descriptor but their own (close_fds), so none of the agent's other children keeps it open.
            self._watcher = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), self.path], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd="/")
        except OSError:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def close(self) -> None:
        """Remove the folder, and end the watcher (end-of-file on its pipe)."""
        shutil.rmtree(self.path, ignore_errors=True)
        try:
            self._watcher.stdin.close()
        except OSError:
            pass
        try:
            self._watcher.wait(WATCHER_WAIT_S)
        except subprocess.TimeoutExpired:
            self._watcher.kill()
            self._watcher.wait()


def remove(folder: str, within_s: float = REMOVE_FOR_S) -> bool:
    """rmtree, again while something still writes there, until it is gone or ``within_s`` ran out."""
    deadline = time.monotonic() + within_s
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.lexists(folder) or time.monotonic() > deadline:
            return not os.path.lexists(folder)
        time.sleep(0.2)


def watch(folder: str) -> None:
    """Wait for end-of-file on stdin (nothing is ever written there), then remove ``folder``."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    remove(folder)


if __name__ == "__main__":
    watch(sys.argv[1])
