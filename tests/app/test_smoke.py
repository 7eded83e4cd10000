"""`python main.py` opens the window and exits cleanly, quickly, without torch, leaving no process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def processes_with_marker(marker: str) -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.environ().get("SPLITSCOPE_TEST_MARKER") == marker:
                found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def test_main_py_opens_the_window_and_exits_cleanly(private_state):
    marker = uuid.uuid4().hex
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SPLITSCOPE_QUIT_AFTER_MS="2500",
               SPLITSCOPE_TEST_MARKER=marker, PYTHONPATH=str(ROOT))
    launched = time.time()
    proc = subprocess.run([sys.executable, "main.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith('{"splitscope_app"')]
    assert lines, proc.stderr[-3000:]
    report = json.loads(lines[-1])["splitscope_app"]
    assert report["title"] == "Splitscope"
    # Torch stays out of the app's process: validation and profiling run in the planner process.
    assert report["torch_imported"] is False and report["torch_imported_at_quit"] is False
    # The window shows: 1.5 to 3 s after launching the process here, `make bench` says exactly; a sanity bound.
    assert report["shown_at_unix"] - launched <= 20.0, report
    # The planner process and the telemetry thread went with the app.
    assert processes_with_marker(marker) == []


def test_the_screenshot_tools_settings_open_the_window_on_its_run(qtbot, qapp_configured, tmp_path, monkeypatch):
    """tools/screenshot.py preselects the README's run through the settings file: written as the panel reads it
    (its older per-field keys were ignored, and the screenshots showed the first form)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("screenshot_tool", ROOT / "tools" / "screenshot.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.write_settings(tmp_path / "settings.ini", steps=400)
    monkeypatch.setenv("SPLITSCOPE_SETTINGS", str(tmp_path / "settings.ini"))
    from app.main_window import MainWindow
    win = MainWindow(start_services=False)
    config = win.experiment.config()
    win.shutdown()
    assert (config.strategy, config.devices, config.micro_batches, config.steps) == ("pipeline", "cpu:2", 4, 400)
