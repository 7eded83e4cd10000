"""What a process forked by the fork server does before it runs its module, and how it ends.

It becomes what ``python -m MODULE`` started with the request's environment,
working directory and descriptors would have been: only the requested file
descriptors open (at the numbers asked for), fresh standard streams on them, the
request's environment, no signal handler or temporary folder of the server's,
its own command line in ps. torch and the engine are already imported: that is
the point.
"""
from __future__ import annotations

import atexit
import io
import os
import runpy
import signal
import sys
import tempfile
import traceback
from typing import NoReturn

from engine.environment import variable
from engine.forkserver.title import set_title
from engine.parent_death import die_with_parent
from engine.wire.forkserver import Spawn


def become(request: Spawn, fds: list[int], server_pid: int, server_sockets: list) -> NoReturn:
    """Run the request's module in this (just forked) process, then exit with its status; never returns."""
    code = 1
    try:
        for sock in server_sockets:  # the server's connections are not this process's to use, or to close later
            sock.detach()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        die_with_parent(expected_parent=server_pid)  # the server ended: so do its children
        _place_descriptors(dict(zip(request.fds, fds, strict=True)))
        os.environ.clear()
        os.environ.update(request.env)
        os.chdir(request.cwd)
        tempfile.tempdir = None  # read TMPDIR anew
        _fresh_streams(unbuffered=bool(variable("PYTHONUNBUFFERED")))
        sys.path[0] = os.getcwd()  # as `python -m` has it
        for entry in reversed(variable("PYTHONPATH", "").split(os.pathsep)):
            if entry and entry not in sys.path:
                sys.path.insert(1, entry)
        _reseed()
        argv = [request.module, *request.argv]
        set_title(" ".join([sys.executable, "-m", *argv, *filter(None, [request.title])]))
        sys.argv = argv
        # Run afresh, as `python -m` runs it: not the server's copy, if one of its imports took it.
        sys.modules.pop(request.module, None)
        # What the module registers runs at its end; the server's imports' own (torch's teardown, 70 ms of
        # copied pages here) do not: the ranks skip the interpreter's teardown anyway (engine/run/rank.py).
        atexit._clear()
        try:
            runpy.run_module(request.module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except KeyboardInterrupt:
            traceback.print_exc()
            code = -signal.SIGINT
        except BaseException:
            traceback.print_exc()
            code = 1
        _shut_down()
    except BaseException:  # the set-up itself failed: say so, as the interpreter would
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if code == -signal.SIGINT:  # as the interpreter ends on an uncaught KeyboardInterrupt
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


def _reseed() -> None:
    """The random states a fresh interpreter seeds from the OS at import: fresh here too (Python's own
    ``random`` reseeds itself after a fork; numpy's global state, imported with torch, does not)."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()


def _shut_down() -> None:
    """What the interpreter does before it exits: wait for the threads that are not daemons, run atexit."""
    import threading
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()


def _exit_code(value) -> int:
    """sys.exit's argument as the interpreter would turn it into a status."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _place_descriptors(wanted: dict[int, int]) -> None:
    """Each received descriptor at the number asked for (``wanted``: number -> received), every other closed."""
    import fcntl
    # Out of the way first: a received descriptor may sit at a number another one is wanted at.
    above = max([*wanted, *wanted.values(), 2]) + 1
    moved = {target: fcntl.fcntl(fd, fcntl.F_DUPFD, above) for target, fd in wanted.items()}
    for target, fd in moved.items():
        os.dup2(fd, target, inheritable=True)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in wanted:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed already


_SERVER_STREAMS: list = []  # held, never collected: a collected stream would close the descriptor it held


def _fresh_streams(unbuffered: bool) -> None:
    """sys.stdin, stdout and stderr on descriptors 0, 1 and 2, as the interpreter would open them."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    _SERVER_STREAMS.extend([sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__])

    def writer(fd: int, errors: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w", closefd=False)
        interactive = raw.isatty()
        if unbuffered:
            return io.TextIOWrapper(raw, encoding=encoding, errors=errors, write_through=True)
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors=errors,
                                line_buffering=interactive or fd == 2)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                                 encoding=encoding, errors=errors)
    sys.stdout = sys.__stdout__ = writer(1, errors)
    sys.stderr = sys.__stderr__ = writer(2, "backslashreplace")
