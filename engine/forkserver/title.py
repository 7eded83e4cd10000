"""A forked process's command line, as ps, top, nvitop and psutil show it.

A child of the fork server would show the server's own command line. Linux reads
/proc/PID/cmdline from the process's original argument area; when that area's
last byte is not NUL it reads a title up to the first NUL instead (the
setproctitle convention), so the area is overwritten in place. It holds as many
bytes as the server's own command line, which leaves room for a title on purpose
(engine/forkserver/client.py ``TITLE_ROOM``).
"""
from __future__ import annotations

import ctypes

# /proc/PID/stat fields, counted from 1 (proc(5)); the name (field 2) may hold spaces, hence the split at ")".
ARG_START, ARG_END = 48, 49


def set_title(title: str) -> None:
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start, end = int(fields[ARG_START - 3]), int(fields[ARG_END - 3])
    except (OSError, IndexError, ValueError):
        return
    size = end - start
    if size < 2:
        return
    text = title.encode("utf-8", "replace")[: size - 2]
    # The title, a NUL to end it, NULs, and a last byte that is not NUL: "read the title, not the arguments".
    area = text + b"\0" * (size - 1 - len(text)) + b" "
    ctypes.memmove(start, area, size)
