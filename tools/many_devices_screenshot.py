"""Screenshots of the real window watching a data-parallel run of 64 devices on 8 nodes (synthetic ranks).

    python tools/many_devices_screenshot.py [--out-dir resources] [--seconds 25]

No machine here has 64 devices, so the ranks are simulated: a thread hands the window
their telemetry at 10 Hz as a run's session does, and their merged steps come ten
times a second, each device's data, forward, backward and all-reduce as a DDP rank
times them. Three devices misbehave as real ones do: node2/cuda:5 is slow (the
straggler every other device waits for at each all-reduce), node6/cuda:1 waits on its
input pipeline, node4/cuda:7 holds more memory. The window (offscreen; on the display
with QT_QPA_PLATFORM=xcb) is grabbed at 1280x800 and 1920x1080 into
``screenshot-64-devices-<size>.png``, with a private, empty history and settings.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAMES = [f"node{n}/cuda:{d}" for n in range(8) for d in range(8)]
STRAGGLER, STARVED, HEAVY = "node2/cuda:5", "node6/cuda:1", "node4/cuda:7"
STEP_S = 0.125


def intervals(step: int, start: float) -> dict[str, list]:
    """One DDP step: each device's input, forward and backward, then the all-reduce that ends when the last
    device's backward has ended (the others wait in it)."""
    import random
    rng = random.Random(step)
    ends, out = {}, {}
    for name in NAMES:
        data = 0.035 if name == STARVED else 0.004
        forward = (0.032 if name == STRAGGLER else 0.018) * rng.uniform(0.97, 1.03)
        backward = (0.068 if name == STRAGGLER else 0.036) * rng.uniform(0.97, 1.03)
        t = start
        out[name] = [["data", t, t + data], ["forward", t + data, t + data + forward],
                     ["backward", t + data + forward, t + data + forward + backward]]
        ends[name] = t + data + forward + backward
    done = max(ends.values()) + 0.006
    for name in NAMES:
        out[name].append(["communication", ends[name] - 0.01, done])   # overlapping its backward's tail
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=str(ROOT / "resources"))
    parser.add_argument("--seconds", type=float, default=25.0, help="seconds of the run before the grabs")
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    private = tempfile.mkdtemp(prefix="splitscope-shot-")   # an empty history and default settings, not the user's
    os.environ["SPLITSCOPE_DB"] = str(Path(private) / "runs.sqlite3")
    os.environ["SPLITSCOPE_SETTINGS"] = str(Path(private) / "settings.ini")
    from PySide6 import QtCore, QtWidgets

    from app.application import configure
    from app.main_window import RUN_REDRAW_MS, MainWindow
    from app.state.live_data import RunProgress
    from engine.config import ExperimentConfig
    from engine.results import Step
    from engine.telemetry.sample import DeviceSample
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(["splitscope"])
    configure(app)
    win = MainWindow(telemetry_hz=10.0, start_services=False)
    win.resize(1920, 1080)
    win.show()
    progress = RunProgress(run_id="simulated", label="ddp over 8 nodes (simulated ranks)",
                           config=ExperimentConfig(strategy="ddp"), devices=NAMES, steps_total=100_000)
    win.plots.begin_run(progress)
    win.plots.set_live_title("Live: ddp over 8 nodes x 8 GPUs (simulated ranks)")
    win.redraw_timer.setInterval(RUN_REDRAW_MS)
    stop = threading.Event()

    def feed() -> None:
        import random
        rng = random.Random(0)
        while not stop.is_set():
            t = time.perf_counter()
            samples = []
            for name in NAMES:
                busy = {STRAGGLER: 97.0, STARVED: 52.0}.get(name, 71.0)
                memory = (61 if name == HEAVY else 38 + NAMES.index(name) % 3) * 2 ** 30
                samples.append(DeviceSample(t=t, device=name, util=min(100.0, busy + rng.gauss(0, 6)),
                                            mem_used=memory, mem_total=80 * 2 ** 30))
            win.runs.worker._samples.add(samples)
            stop.wait(0.1)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    step = [0]

    def next_step() -> None:
        n = step[0]
        spans = intervals(n, n * STEP_S)
        busy = {name: min(1.0, sum(t1 - t0 for _, t0, t1 in rows[:3]) / STEP_S) for name, rows in spans.items()}
        event = Step(step=n, throughput=64 * 32 / STEP_S, loss=2.3 * 0.999 ** n, time_s=STEP_S, intervals=spans,
                     busy=busy)
        progress.steps_done = n + 1
        progress.busy = busy
        progress.bubble_history.append(1 - sum(busy.values()) / len(busy))
        win.plots.add_step(event)
        step[0] += 1
    stepper = QtCore.QTimer()
    stepper.timeout.connect(next_step)
    stepper.start(int(STEP_S * 1000))
    loop = QtCore.QEventLoop()
    QtCore.QTimer.singleShot(int(args.seconds * 1000), loop.quit)
    loop.exec()
    out = Path(args.out_dir)
    for width, height in ((1280, 800), (1920, 1080)):
        win.resize(width, height)
        end = time.monotonic() + 2.5
        while time.monotonic() < end:   # a few redraws at the new size
            app.processEvents()
            time.sleep(0.02)
        path = out / f"screenshot-64-devices-{width}x{height}.png"
        win.grab().save(str(path))
        print(path)
    stepper.stop()
    stop.set()
    feeder.join()
    win.shutdown()
    shutil.rmtree(private, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
