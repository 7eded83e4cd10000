"""A pipe's lines read a few at a time: after the first bytes of a wait come, the reader waits ``hold_s`` more and
takes everything that came meanwhile in the same pass.

A rank writes a line of events a step (engine/run/rank.py EventChannel); read line by line, each line woke the
rank's reader thread and then the worker's loop, a pair of thread hand-offs a step a rank, on cores the ranks
train on. The lines wait in the pipe (written, so a rank killed or stopped meanwhile loses none of them); the
pipe is enlarged where the system allows, so that a rank writing fast does not fill it during a hold, and a
pass that finds a full read's worth goes on at once.
"""
from __future__ import annotations

import fcntl
import os
import select
import time
from collections.abc import Iterator

READ_BYTES = 1 << 16
PIPE_BYTES = 1 << 20   # Linux's default pipe-max-size: what an unprivileged process may ask for


def enlarge_pipe(fd: int) -> bool:
    """The pipe's buffer made PIPE_BYTES where the system allows it; whether it did (a pipe left at 64 KiB or less,
    past the system's pipe-max-size or a user's pipe pages, is better read without a hold: a rank writing fast
    would wait on it)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):   # not Linux, or past the system's limits
        return False
    return True


def held_lines(fd: int, hold_s: float) -> Iterator[list[str]]:
    """The lines of ``fd`` (UTF-8, undecodable bytes replaced, without their newline), a list per pass, until its
    end (a last line without a newline included)."""
    pending = b""
    poller = select.poll()   # not select.select: it refuses a descriptor numbered 1024 or more
    poller.register(fd, select.POLLIN)
    while True:
        chunk = os.read(fd, READ_BYTES)   # waits for the first bytes
        if not chunk:
            break
        if len(chunk) < READ_BYTES:
            time.sleep(hold_s)
        ended = False
        parts, taken = [pending, chunk], len(chunk)
        # bounded: a rank writing without pause still has its lines handed on
        while taken < PIPE_BYTES and poller.poll(0):
            more = os.read(fd, READ_BYTES)
            taken += len(more)
            if not more:
                ended = True
                break
            parts.append(more)
        *lines, pending = b"".join(parts).split(b"\n")
        if lines:
            yield [line.decode("utf-8", "replace") for line in lines]
        if ended:
            break
    if pending:
        yield [pending.decode("utf-8", "replace")]
