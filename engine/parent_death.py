"""Ending a process with its parent: Linux's parent-death signal, which even a SIGKILL of the parent sends."""
from __future__ import annotations

import os
import signal


def die_with_parent(expected_parent: int | None = None) -> None:
    """SIGKILL this process when its parent dies (Linux; elsewhere nothing).

    The signal comes when the parent *thread* that started us ends, so callers start such children from a
    thread that lives as long as they should. ``expected_parent``: a parent already gone before the call
    (we were re-parented) ends us now.
    """
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        return
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(3)


def become_subreaper() -> bool:
    """Make this process the child subreaper of what it starts (Linux): a descendant whose parent ends, a daemon's
    double fork included, becomes this process's child instead of init's, so that it can still be found and ended
    (``psutil.Process().children(recursive=True)``). False where the system has no such thing."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
