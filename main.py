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
        return cli_main(argv)
    from app import launch
    return launch(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
