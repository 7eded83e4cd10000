"""Run Python code in a child process where Qt (or any package named) cannot be imported.

The engine's and the CLI's promise: they run where Qt is not installed, and the
GPU machines have neither Qt nor matplotlib (exports say what they lack there).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

from procs import ROOT

QT = ("PySide6", "shiboken6", "pyqtgraph")


def prelude(hidden: tuple[str, ...]) -> str:
    return textwrap.dedent(f"""
        import sys, importlib.abc
        class Hidden(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in {hidden!r}:
                    raise ImportError(f'No module named {{name!r}} (hidden by this test)')
        sys.meta_path.insert(0, Hidden())
        sys.path.insert(0, {str(ROOT)!r})
    """)


def run_without(hidden: tuple[str, ...], body: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", prelude(hidden) + textwrap.dedent(body)], capture_output=True,
                          text=True, timeout=timeout)


def run_without_qt(body: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_without(QT, body, timeout)
