"""Take the README screenshot from the real app during a real run, under Xvfb.

    python tools/screenshot.py [--out resources/screenshot.png] [--size 1280x800] [--experiment NAME]
                               [--strategy S --devices D] [--nodes ADDR:PORT,... --token-file F]

Needs Xvfb, xdotool and ImageMagick's ``import`` (Debian/Ubuntu:
``apt-get install -y xvfb xdotool imagemagick``). Steps:

1. A private run store gets two headless runs of the same model through the CLI
   (naive model-parallel and a 4-micro-batch pipeline), so the history has rows
   to compare.
2. A private settings file preselects mlp 512x8 on cpu:2, pipeline, 4
   micro-batches, batch 2048.
3. The app starts on a fresh Xvfb display (``python main.py``, the real window);
   once the planner has checked the config, Ctrl+R is pressed, as a user would
   (with ``--experiment NAME``: the Experiments menu's NAME is chosen with the keyboard).
4. Some seconds into the run, ImageMagick captures the window. Then Esc stops
   the run and Ctrl+Q quits; everything started here is ended here.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # run as a script: the engine's preset names come from the checkout


def need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        sys.exit(f"screenshot: {tool} not found; install xvfb, xdotool and imagemagick")
    return path


def start_xvfb(size: str) -> tuple[subprocess.Popen, str]:
    """Xvfb on the first free display it finds (-displayfd tells us which)."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([need("Xvfb"), "-displayfd", str(write_fd), "-screen", "0", f"{size}x24",
                             "-nolisten", "tcp"], pass_fds=(write_fd,), stderr=subprocess.DEVNULL)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        number = fh.readline().strip()
    if not number:
        proc.kill()
        sys.exit("screenshot: Xvfb did not start")
    return proc, f":{number}"


def cli_run(env: dict, *args: str) -> None:
    cmd = [sys.executable, "main.py", "run", "--model", "mlp", "--width", "512", "--depth", "8",
           "--devices", "cpu:2", "--batch-size", "2048", "--steps", "12", "--json", *args]
    print("screenshot: headless run:", " ".join(args), flush=True)
    subprocess.run(cmd, cwd=ROOT, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=300)


def write_settings(path: Path, steps: int, strategy: str = "pipeline", devices: str = "cpu:2", nodes: str = "",
                   token_file: str = "") -> None:
    """The panel's form as the app saves it (app/views/experiment_panel.py ``save``: the config as JSON), written by
    QSettings itself: its INI quoting of a JSON value is its own."""
    from PySide6 import QtCore

    from engine.config import ExperimentConfig
    config = ExperimentConfig(model="mlp", width=512, depth=8, devices=devices, strategy=strategy, micro_batches=4,
                              schedule="gpipe", batch_size=2048, steps=steps, nodes=nodes or None,
                              token_file=token_file or None)
    settings = QtCore.QSettings(str(path), QtCore.QSettings.Format.IniFormat)
    settings.setValue("experiment/config", config.to_json())
    settings.setValue("experiment/mb_mode", "micro_batches")
    settings.setValue("experiment/mb_value", 4)
    settings.setValue("experiment/token_file", token_file)
    settings.sync()


def xdotool(*args: str, env: dict) -> str:
    return subprocess.run([need("xdotool"), *args], env=env, capture_output=True, text=True,
                          timeout=60).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="README screenshot of the real app during a run")
    parser.add_argument("--out", default=str(ROOT / "resources" / "screenshot.png"))
    parser.add_argument("--size", default="1280x800")
    parser.add_argument("--settle", type=float, default=9.0, help="seconds for the planner to check the config")
    parser.add_argument("--into-run", type=float, default=14.0, help="seconds into the run to capture")
    parser.add_argument("--no-history", action="store_true", help="skip the headless runs for the history")
    parser.add_argument("--experiment", help="start this experiment from the menu instead of a run")
    parser.add_argument("--strategy", default="pipeline", help="the run's strategy (default pipeline)")
    parser.add_argument("--devices", default="cpu:2", help="the run's devices (default cpu:2; per node with --nodes)")
    parser.add_argument("--nodes", default="", help="node agents to run on (ADDR:PORT,...), as the Nodes field")
    parser.add_argument("--token-file", default="", help="with --nodes: the agents' token file")
    args = parser.parse_args(argv)
    need("import")
    width, height = args.size.split("x")

    with tempfile.TemporaryDirectory(prefix="splitscope-shot-") as tmp:
        env = dict(os.environ, SPLITSCOPE_DB=str(Path(tmp) / "runs.sqlite3"),
                   SPLITSCOPE_SETTINGS=str(Path(tmp) / "settings.ini"), PYTHONPATH=str(ROOT))
        env.pop("QT_QPA_PLATFORM", None)
        if not args.no_history:
            cli_run(env, "--strategy", "model-parallel")
            cli_run(env, "--strategy", "pipeline", "--micro-batches", "4")
        write_settings(Path(tmp) / "settings.ini", steps=40 if args.experiment else 400,  # points one after another
                       strategy=args.strategy, devices=args.devices, nodes=args.nodes, token_file=args.token_file)
        xvfb, display = start_xvfb(args.size)
        env.update(DISPLAY=display, QT_QPA_PLATFORM="xcb",
                   SPLITSCOPE_QUIT_AFTER_MS=str(int((args.settle + args.into_run + 60) * 1000)))
        app = None
        try:
            app = subprocess.Popen([sys.executable, "main.py"], cwd=ROOT, env=env)
            window = xdotool("search", "--sync", "--onlyvisible", "--name", "^Splitscope$", env=env).split()[0]
            xdotool("windowmove", window, "0", "0", env=env)
            xdotool("windowsize", window, width, height, env=env)
            xdotool("windowfocus", "--sync", window, env=env)
            time.sleep(args.settle)       # a script, not a test: the planner checks the config meanwhile
            if args.experiment:
                from engine.experiments import PRESETS
                downs = ["Down"] * list(PRESETS).index(args.experiment)
                xdotool("key", "--clearmodifiers", "alt+x", *downs, "Return", env=env)
            else:
                xdotool("key", "--clearmodifiers", "ctrl+r", env=env)
            print(f"screenshot: {args.experiment or 'run'} started; capturing in {args.into_run:g} s", flush=True)
            # The pointer off the plots: where Xvfb leaves it (the screen's middle), its hover highlights a device.
            xdotool("mousemove", "--window", window, str(int(width) - 2), str(int(height) - 2), env=env)
            time.sleep(args.into_run)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([need("import"), "-display", display, "-window", window, args.out], check=True,
                           timeout=60)
            print(f"screenshot: wrote {args.out}", flush=True)
            xdotool("key", "Escape", env=env)   # stop the run
            time.sleep(4)
            xdotool("key", "ctrl+q", env=env)   # quit
            app.wait(timeout=30)
        finally:
            if app is not None and app.poll() is None:
                app.send_signal(signal.SIGTERM)
                try:
                    app.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    app.kill()
                    app.wait()
            xvfb.terminate()
            xvfb.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
