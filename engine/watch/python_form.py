"""``watch -- python [-u] SCRIPT.py [ARGS]`` or ``watch -- python -m MODULE [ARGS]``: a script as its user starts
it without torchrun, run as one plain process (engine/strategies/script.py ``PLAIN``) in Splitscope's own
interpreter. Interpreter options that change nothing a watch measures (``-u``, ``-B``) are taken; any other is
refused with the reason, before anything starts (``-c`` has no script to watch; ``-O``, ``-X``, ``-W`` and the
like would run another program than the user's command says, in an interpreter already started)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

TAKEN = ("-u", "-B")   # unbuffered output (the watch reads it line by line anyway), no .pyc files written
PYTHON = re.compile(r"python(3(\.\d+)?)?")


@dataclass(frozen=True)
class PythonForm:
    script: str | None      # the script file, or None for a module
    module: str | None      # `-m MODULE`
    args: list[str]


def is_python(word: str) -> bool:
    """Whether the command's first word is a Python interpreter (python, python3, python3.11, or a path to one)."""
    return bool(PYTHON.fullmatch(os.path.basename(word)))


def read(words: list[str]) -> tuple[PythonForm | None, list[str]]:
    """(The command line after ``python``, read; or None) and what stops it."""
    rest = list(words)
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-"):
        option = rest.pop(0)
        if option in TAKEN:
            continue
        return None, [f"{option}: watch -- python takes a script (python SCRIPT.py) or a module (python -m "
                      f"MODULE), with {' or '.join(TAKEN)} at most"]
    if not rest or rest[0] == "-":
        return None, ["give the script to run: watch -- python SCRIPT.py [ARGS] (or python -m MODULE [ARGS])"]
    if rest[0] == "-m":
        if len(rest) < 2:
            return None, ["-m: give the module to run: watch -- python -m MODULE [ARGS]"]
        return PythonForm(None, rest[1], rest[2:]), []
    return PythonForm(rest[0], None, rest[1:]), []
