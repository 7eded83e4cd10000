"""Splitscope: the desktop app with no arguments, a CLI subcommand otherwise.

Qt is imported only for the app: the CLI runs on machines without a display
(and without Qt installed).
"""
from __future__ import annotations

import sys

CLI_COMMANDS = {"run", "runs", "devices", "experiment", "export", "-h", "--help"}


def main(argv: list[str]) -> int:
    if argv and argv[0] in CLI_COMMANDS:
        from engine.cli import main as cli_main
        from engine.validate import validate_in_child
        # The command line supervises runs of any length: the checks that import torch (about 500 MB)
        # run in a short-lived child, and this process never holds torch.
        validate_in_child()
        return cli_main(argv)
    from app import launch
    return launch(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
