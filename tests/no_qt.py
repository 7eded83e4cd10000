"""Run Python code in a child process where Qt cannot be imported (the CLI's and engine's promise)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from procs import ROOT

PRELUDE = textwrap.dedent(f"""
    import sys, importlib.abc
    class NoQt(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph'):
                raise ImportError('Qt is blocked in this test: ' + name)
    sys.meta_path.insert(0, NoQt())
    sys.path.insert(0, {str(ROOT)!r})
""")


def run_without_qt(body: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=timeout)
