"""The app's benchmark measurements on the real window, offscreen (bench/app_bench.py runs them).

1. Redraw: the real main window with 8 devices (or 64, 256: 8 to a node, drawn as
   heatmaps) and one hour of 10 Hz telemetry history (36,000 samples per device per
   metric), 3,600 steps of throughput and loss, and a timeline of the devices. Each
   frame appends one new sample per device (so every curve is dirty, as in a live
   run), hands the buffers to pyqtgraph and repaints the window synchronously. Median
   and p95 ms, for the default 2-minute window and with the whole hour in view. Goal:
   median <= 16 ms for 8 and for 64 devices, <= 33 ms for 256.
2. Idle CPU: the app with its idle telemetry at 10 Hz and nothing else to do,
   after a warm-up: CPU seconds of the app's process per wall second. Goal: <= 3%.
   With many devices (``bench_live_cpu``): a thread hands the window 64 simulated
   devices' samples at 10 Hz, as a run's session does, and a step of 64 devices'
   intervals comes twice a second; the window redraws at its run rate. Goal: <= 5%.
3. Stalls: a 10 ms QTimer heartbeat on the UI thread during a real run (naive
   model-parallel, mlp 512x8, batch 2048, on cpu:2); the worst lateness of a
   beat. Goal: < 50 ms.
4. History open: a stored long run (bench/long_run_bench.py records one through
   the real session and store) selected in the history, until its summary and
   plots are shown; median and worst of a few openings. Goal: < 1 s.
"""
from __future__ import annotations

import collections
import os
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

GOALS = {"redraw_median_ms": 16.0, "idle_cpu_percent": 3.0, "stall_max_ms": 50.0, "history_open_ms": 1000.0,
         "redraw_256_median_ms": 33.0, "live_cpu_64_percent": 5.0}


def _quiet_offscreen_warnings(mode, context, message) -> None:
    # The offscreen platform warns on every window resize; the figures are what matters here.
    if "propagateSizeHints" not in message:
        sys.stderr.write(message + "\n")


def _app():
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import QtCore, QtWidgets

    from app.application import configure
    QtCore.qInstallMessageHandler(_quiet_offscreen_warnings)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(["splitscope-bench"])
    configure(app)
    return app


def _spin(app, seconds: float) -> None:
    """Run the event loop for ``seconds`` (timers, signals and paints all happen)."""
    from PySide6 import QtCore
    loop = QtCore.QEventLoop()
    QtCore.QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def private_env(tmp: str) -> None:
    os.environ["SPLITSCOPE_DB"] = os.path.join(tmp, "bench.sqlite3")
    os.environ["SPLITSCOPE_SETTINGS"] = os.path.join(tmp, "bench.ini")


def bench_redraw(frames: int = 40, devices: int = 8, hz: float = 10.0, hours: float = 1.0) -> dict:
    import numpy as np

    from app.main_window import MainWindow
    from app.state.live_data import RunProgress
    from engine.config import ExperimentConfig
    from engine.results import Step
    app = _app()
    win = MainWindow(telemetry_hz=hz, start_services=False)
    win.resize(1600, 1000)
    win.show()
    app.processEvents()
    panel = win.plots
    n = int(hz * 3600 * hours)
    t_end = time.perf_counter() - win.t0
    t = t_end - (n - 1) / hz + np.arange(n) / hz
    names = device_names(devices)
    for d, name in enumerate(names):
        util = 50 + 45 * np.sin(t / (7 + d)) * np.cos(t / 31)
        mem = 20e9 + 5e9 * np.sin(t / (50 + d))
        panel.telemetry._buffer(panel.telemetry.util, name).extend(np.column_stack([t, util]))
        panel.telemetry._buffer(panel.telemetry.mem, name).extend(np.column_stack([t, mem]))
    progress = RunProgress(run_id="bench", config=ExperimentConfig(strategy="pipeline"), devices=names,
                           steps_total=3600, micro_batches=8, split=list(range(1, devices)))
    panel.begin_run(progress)
    for s in range(3600):
        base = s * 1.0
        intervals = {}
        if s >= 3597:
            for d, name in enumerate(names):
                spans = []
                for m in range(8):
                    f0 = base + 0.02 * (m + d)
                    spans.append(["forward", f0, f0 + 0.018])
                    b0 = base + 0.5 + 0.02 * (m + devices - d)
                    spans.append(["backward", b0, b0 + 0.03])
                    spans.append(["transfer", f0 + 0.018, f0 + 0.02])
                intervals[name] = spans
        panel.steps.add(Step(step=s, throughput=float(5000 + 100 * np.sin(s / 50)), loss=float(2.3 * np.exp(-s / 900)),
                             time_s=1.0, intervals=intervals))
    progress.busy = {name: 0.7 for name in names}
    panel.redraw(force=True)
    win.repaint()
    app.processEvents()

    def measure(window_s: float) -> dict:
        panel.window_s = window_s
        panel.telemetry_frame_s = panel.step_frame_s = 0.0  # every frame redraws every curve: the worst case
        times = []
        for f in range(frames):
            # One new sample per device: every telemetry curve is dirty, as in a live run.
            now = time.perf_counter() - win.t0
            panel.telemetry.add([SimpleNamespace(t=now + win.t0, device=name, util=50.0, mem_used=2e10,
                                                 mem_total=8e10) for name in names])
            panel.steps.add(Step(step=3600 + f, throughput=5000.0, loss=0.1, time_s=1.0))
            t0 = time.perf_counter()
            panel.redraw(force=True)  # every group: the bench times a redraw of all plots
            win.repaint()  # synchronous paint of the whole window, plots included
            times.append((time.perf_counter() - t0) * 1000)
            app.processEvents()
        times.sort()
        return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(0.95 * len(times)) - 1], 2),
                "max_ms": round(times[-1], 2)}

    live = measure(120.0)
    whole = measure(3600.0 * hours)
    points = sum(len(b) for b in panel.telemetry.util.values()) + sum(len(b) for b in panel.telemetry.mem.values())
    win.shutdown()
    win.deleteLater()
    app.processEvents()
    return {"devices": devices, "telemetry_points": points, "window_2min": live, "window_1h": whole}


def bench_idle_cpu(seconds: float = 10.0, warmup: float = 4.0, hz: float = 10.0) -> dict:
    import psutil

    from app.main_window import MainWindow
    app = _app()
    win = MainWindow(telemetry_hz=hz)
    win.show()
    _spin(app, warmup)  # planner start-up (its own process), first telemetry, first paints
    proc = psutil.Process()
    c0, w0 = proc.cpu_times(), time.perf_counter()
    _spin(app, seconds)
    c1, w1 = proc.cpu_times(), time.perf_counter()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    devices = len(win.telemetry.devices)
    sampler_cpu = win.idle.cpu_time_s()
    win.shutdown()
    win.deleteLater()
    app.processEvents()
    return {"seconds": seconds, "telemetry_hz": hz, "devices": devices,
            "cpu_percent_of_a_core": round(100 * cpu / (w1 - w0), 2),
            "sampler_thread_cpu_s_total": sampler_cpu}


def device_names(devices: int) -> list[str]:
    """Up to 8 devices one machine's; more, 8 to a node, as a run over several machines names them."""
    return [f"cuda:{d}" for d in range(devices)] if devices <= 8 else \
        [f"node{d // 8}/cuda:{d % 8}" for d in range(devices)]


def simulated_step(step: int, names: list[str], start: float):
    """A data-parallel step of ``names``: forward, backward, then the all-reduce they wait at."""
    from engine.results import Step
    return Step(step=step, throughput=5000.0, loss=1.0, time_s=0.1, busy=dict.fromkeys(names, 0.9),
                intervals={name: [["forward", start, start + 0.02], ["backward", start + 0.02, start + 0.06],
                                  ["communication", start + 0.06, start + 0.09]] for name in names})


def bench_live_cpu(devices: int = 64, seconds: float = 10.0, warmup: float = 3.0, hz: float = 10.0) -> dict:
    import psutil
    from PySide6 import QtCore

    from app.main_window import RUN_REDRAW_MS, MainWindow
    from app.state.live_data import RunProgress
    from engine.config import ExperimentConfig
    from engine.telemetry.sample import DeviceSample
    app = _app()
    win = MainWindow(telemetry_hz=hz, start_services=False)
    win.show()
    names = device_names(devices)
    progress = RunProgress(run_id="bench", config=ExperimentConfig(strategy="ddp"), devices=names, steps_total=10**6)
    win.plots.begin_run(progress)
    win.redraw_timer.setInterval(RUN_REDRAW_MS)   # a run's rate
    stop = threading.Event()

    def feed() -> None:   # the session's sampler thread, as a run hands its samples to the window
        period, deadline = 1.0 / hz, time.perf_counter()
        while not stop.is_set():
            t = time.perf_counter()
            win.runs.worker._samples.add([DeviceSample(t=t, device=name, util=50.0 + (i % 7), mem_used=2e10,
                                                       mem_total=8e10) for i, name in enumerate(names)])
            deadline += period
            stop.wait(max(0.0, deadline - time.perf_counter()))
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    steps = [0]

    def step() -> None:
        win.plots.add_step(simulated_step(steps[0], names, steps[0] * 0.5))
        steps[0] += 1
    stepper = QtCore.QTimer()
    stepper.timeout.connect(step)
    stepper.start(500)
    _spin(app, warmup)
    proc = psutil.Process()
    c0, w0 = proc.cpu_times(), time.perf_counter()
    _spin(app, seconds)
    c1, w1 = proc.cpu_times(), time.perf_counter()
    stepper.stop()
    stop.set()
    feeder.join()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    heat = win.plots.telemetry_redraw.heat
    win.shutdown()
    win.deleteLater()
    app.processEvents()
    return {"devices": devices, "seconds": seconds, "telemetry_hz": hz, "heatmaps": heat,
            "cpu_percent_of_a_core": round(100 * cpu / (w1 - w0), 2)}


def bench_history_open(db: str, run_id: str, times: int = 5) -> dict:
    """Milliseconds from selecting ``run_id`` in the history to its plots being shown, ``times`` over."""
    from app.main_window import MainWindow
    os.environ["SPLITSCOPE_DB"] = db
    app = _app()
    win = MainWindow(start_services=False)
    win.show()
    shown: list[list] = []
    win.sigHistoryShown.connect(shown.append)
    win.history.refresh()
    row = win.history.run_ids().index(run_id)
    took = []
    for _ in range(times):
        win.history.table.clearSelection()
        app.processEvents()
        shown.clear()
        started = time.perf_counter()
        win.history.table.selectRow(row)
        while not shown and time.perf_counter() - started < 30:
            app.processEvents()
        took.append(1000 * (time.perf_counter() - started))
    win.shutdown()
    win.deleteLater()
    app.processEvents()
    return {"times": times, "median_ms": round(statistics.median(took), 1), "max_ms": round(max(took), 1)}


def bench_stalls(steps: int = 30) -> dict:
    import psutil
    from PySide6 import QtCore

    from app.main_window import MainWindow
    app = _app()
    win = MainWindow()
    win.show()
    e = win.experiment
    e.model_combo.setCurrentIndex(e.model_combo.findData("mlp"))
    e.width_spin.setValue(512)
    e.depth_spin.setValue(8)
    e.devices_combo.setCurrentText("cpu:2")
    e.strategy_combo.setCurrentIndex(e.strategy_combo.findData("model-parallel"))
    e.batch_spin.setValue(2048)
    e.steps_spin.setValue(steps)
    deadline = time.monotonic() + 60
    while not (win.run_action.isEnabled() and win.split_view.blocks) and time.monotonic() < deadline:
        _spin(app, 0.1)
    if not win.run_action.isEnabled():
        win.shutdown()
        return {"error": f"the run could not start: {win.run_reason.text()}"}
    from app.application import keep_start_up_objects_out_of_collections
    keep_start_up_objects_out_of_collections()  # as the app does once its window is up

    period_ms = 10
    beats: list[float] = []
    heartbeat = QtCore.QTimer()
    heartbeat.setTimerType(QtCore.Qt.TimerType.PreciseTimer)
    heartbeat.timeout.connect(lambda: beats.append(time.perf_counter()))
    done: dict = {}
    loop = QtCore.QEventLoop()

    def finished(result):   # an engine.run.session.RunResult
        done["status"] = result.status
        loop.quit()

    win.sigRunFinished.connect(finished)
    heartbeat.start(period_ms)
    where = StallSampler(beats)
    where.start()
    proc = psutil.Process()
    c0 = proc.cpu_times()
    t0 = time.perf_counter()
    win.run_action.trigger()
    QtCore.QTimer.singleShot(300_000, loop.quit)
    loop.exec()
    heartbeat.stop()
    where.stop()
    wall = time.perf_counter() - t0
    c1 = proc.cpu_times()
    # The app's whole process (UI thread, the session's reader and sampler threads): what
    # it takes from the cores the ranks train on.
    app_cpu = (c1.user - c0.user) + (c1.system - c0.system)
    gaps = [(b - a) * 1000 - period_ms for a, b in zip(beats, beats[1:], strict=False)]
    win.shutdown()
    win.deleteLater()
    app.processEvents()
    gaps.sort()
    return {"status": done.get("status"), "run_s": round(wall, 2), "beats": len(beats),
            "app_cpu_percent_of_a_core": round(100 * app_cpu / wall, 1),
            "stall_max_ms": round(max(gaps), 1) if gaps else None,
            "stall_p99_ms": round(gaps[int(0.99 * len(gaps)) - 1], 1) if gaps else None,
            "late_over_50ms": sum(g > 50 for g in gaps), "stalled_in": where.worst()}


class StallSampler(threading.Thread):
    """Where the UI thread is while its heartbeat is late: every SAMPLE_S, when the last beat is more than
    LATE_S old, the main thread's innermost frames (of the app, the engine, Qt's Python or pyqtgraph) are
    counted. ``worst``: the stacks that held it longest, with about how many milliseconds each."""
    SAMPLE_S, LATE_S, FRAMES = 0.005, 0.04, 6

    def __init__(self, beats: list[float]):
        super().__init__(daemon=True)
        self.beats, self.main = beats, threading.main_thread().ident
        self.counts: collections.Counter = collections.Counter()
        self.others: collections.Counter = collections.Counter()   # the other threads' stacks meanwhile
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.SAMPLE_S):
            if not self.beats or time.perf_counter() - self.beats[-1] < self.LATE_S:
                continue
            frames = sys._current_frames()
            self.counts[_stack(frames.get(self.main), self.FRAMES)] += 1
            # The UI thread waiting for the GIL shows only the event loop: which other thread ran, then.
            for ident, frame in frames.items():
                if ident not in (self.main, self.ident):
                    self.others[_stack(frame, 3)] += 1

    def stop(self) -> None:
        self.done.set()
        self.join(1.0)

    def worst(self, top: int = 5) -> dict:
        def ranked(counts):
            return [{"ms": round(n * self.SAMPLE_S * 1000), "stack": stack} for stack, n in counts.most_common(top)]
        return {"ui_thread": ranked(self.counts), "other_threads": ranked(self.others)}


def _stack(frame, depth: int) -> str:
    """A thread's innermost ``depth`` frames, innermost first: "folder/file.py:line function < ..."."""
    if frame is None:
        return ""
    return " < ".join(f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno} {f.name}"
                      for f in reversed(traceback.extract_stack(frame)[-depth:]))
