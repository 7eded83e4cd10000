"""The architecture's rules: no Qt in engine/, the CLI runs without Qt, no leftover processes."""
from __future__ import annotations

import re
import subprocess
import sys

import procs
from no_qt import run_without_qt
from procs import ROOT


def test_no_engine_file_imports_qt():
    pattern = re.compile(r"^\s*(from|import)\s+(PySide6|PyQt\d|pyqtgraph|shiboken6)", re.M)
    offenders = [str(p) for p in (ROOT / "engine").rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def test_engine_runs_with_pyside6_unavailable(tmp_path):
    proc = run_without_qt(f"""
        import pkgutil, importlib, engine
        for m in pkgutil.walk_packages(engine.__path__, 'engine.'):
            importlib.import_module(m.name)
        from main import main
        sys.exit(main(['run', '--model', 'seed-toy', '--devices', 'cpu:1', '--steps', '3', '--json',
                       '--db', {str(tmp_path / 'runs.sqlite3')!r}]))
    """)
    assert proc.returncode == 0, proc.stderr
    assert '"status": "finished"' in proc.stdout


def test_leftover_process_detector_sees_a_leaked_process():
    # The autouse fixture relies on this: a tagged child is found, even after the test forgets it.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in [p.pid for p in procs.tagged_processes()]
    finally:
        child.kill()
        child.wait()
    assert child.pid not in [p.pid for p in procs.tagged_processes()]
