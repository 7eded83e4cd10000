"""Splitscope: the desktop app with no arguments, a CLI subcommand otherwise (splitscope/command.py; installed,
the ``splitscope`` command is the same)."""
from __future__ import annotations

import sys

from splitscope.command import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
