"""The ``splitscope`` command (pyproject's console script) and ``python main.py``: the desktop app with no
arguments, a CLI subcommand otherwise.

Qt is imported only for the app: the CLI runs on machines without a display
(and without Qt installed).
"""
from __future__ import annotations

import difflib
import sys


def main(argv: list[str]) -> int:
    if not argv:
        return open_window()
    from engine.cli import COMMANDS, EXIT_INVALID
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help"):
        from engine.cli import main as cli_main
        from engine.run.validate import validate_in_child
        # The command line supervises runs of any length: the checks that import torch (about 500 MB)
        # run in a short-lived child, and this process never holds torch.
        validate_in_child()
        return cli_main(argv)
    nearest = difflib.get_close_matches(argv[0], COMMANDS, n=1)
    hint = f" (did you mean {nearest[0]!r}?)" if nearest else ""
    print(f"error: unknown command {argv[0]!r}{hint}; the commands are: {', '.join(COMMANDS)} "
          "(no arguments opens the app)", file=sys.stderr)
    return EXIT_INVALID


def open_window() -> int:
    from app.system_check import window_problem
    problem = window_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    from app import launch
    return launch([])



def console() -> None:
    """The installed ``splitscope`` command."""
    sys.exit(main(sys.argv[1:]))
