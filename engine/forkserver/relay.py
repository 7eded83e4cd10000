"""``python -m engine.forkserver.relay MODULE [ARGS]``: ``python -m MODULE ARGS`` forked by the fork server, on this
process's own standard streams.

For a parent that can only start programs (Qt's QProcess: the app's planner and what-if child). This process
imports no torch: it asks the fork server whose connection it was handed (``CONNECTION_ENV``, as a worker's) for
the module on its own stdin, stdout and stderr, so the parent reads and writes the child directly, then waits for
it and exits with its status (128 + N for signal N, as a shell says it). SIGTERM is passed on to the child. A
kill of this process closes its connection, and the server then ends the child (engine/forkserver/server.py).
With no connection, or one the server refuses or lost, it becomes ``python -m MODULE ARGS`` itself (exec): the
same program, started fresh. ``SPLITSCOPE_RELAY_IMPORTS`` names modules the server imports before it forks the
child, where it has not yet (the app asks for everything a child of its may import: its server lives as long).
"""
from __future__ import annotations

import os
import signal
import sys

from engine.environment import variable
from engine.forkserver.client import worker_connection
from engine.forkserver.connection import ForkServerError

IMPORTS_ENV = "SPLITSCOPE_RELAY_IMPORTS"   # comma-separated: what the server imports first (messages.Spawn.imports)


def main(argv: list[str]) -> int:
    # A Ctrl-C in the app's terminal reaches its whole group: the app ends its children in order; this one
    # would only print a traceback into the child's stderr.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    module, args = argv[0], argv[1:]
    connection = worker_connection()
    if connection is not None:
        try:
            imports = [name for name in variable(IMPORTS_ENV, "").split(",") if name]
            pid = connection.spawn(module, env=dict(os.environ), cwd=os.getcwd(), fds={0: 0, 1: 1, 2: 2},
                                   argv=args, title=variable("SPLITSCOPE_RELAY_TITLE", ""), imports=imports)
        except ForkServerError:
            connection.close()
        else:
            signal.signal(signal.SIGTERM, lambda *_: connection.signal(pid, signal.SIGTERM))
            code = connection.exit_code(pid, timeout=None)
            return code if code >= 0 else 128 - code
    os.execv(sys.executable, [sys.executable, "-m", module, *args])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
