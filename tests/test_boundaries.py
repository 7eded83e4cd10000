"""The architecture's rules: the import contracts, the CLI runs without Qt, no leftover processes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import procs
from no_qt import run_without_qt
from procs import ROOT


def test_the_import_contracts_hold():
    """.importlinter: no Qt, pyqtgraph or app in engine/; NVML's wrapper lowest in telemetry; no import
    circles among the engine's or the app's modules."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


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
