"""A watched script, first class (issue 54): its command in the Experiment panel's place, read only, while it runs;
its MFU plotted once its summary brings the peaks (a script's dtype is known only once it ran). Events are built,
not run: a second or two each (tests/app/test_watch_in_app.py watches real scripts)."""
from __future__ import annotations

import pytest
from PySide6 import QtWidgets

from engine.config import ExperimentConfig
from engine.events import Device, Finished, Started
from engine.results import MeanStd, RunSummary, Step
from engine.results.efficiency import DeviceEfficiency, Efficiency, Peak

SCRIPT = ExperimentConfig(strategy="script", script="/home/me/train.py", script_args="--epochs 3 --lr 0.1",
                          devices="cpu:2", steps=0, warmup=1)



def test_the_watched_command_takes_the_forms_place_while_it_runs(window_at_1280):
    win = window_at_1280
    win.show_watched_command(SCRIPT)
    assert win.watched.isVisible() and not win.experiment.isVisible() and not win.split_view.isVisible()
    values = {label: shown.text() for label, shown in win.watched.values.items()}
    assert values["Command"] == "torchrun /home/me/train.py --epochs 3 --lr 0.1"
    assert (values["Arguments"], values["Devices"]) == ("--epochs 3 --lr 0.1", "cpu:2")
    assert not win.watched.findChildren(QtWidgets.QAbstractSpinBox) and not win.watched.findChildren(
        QtWidgets.QLineEdit)   # read only: words, nothing to change
    win.show_watched_command(None)   # the run ended: the form again
    assert win.experiment.isVisible() and not win.watched.isVisible()


def test_a_watched_runs_mfu_is_plotted_once_its_summary_brings_the_peaks(window_at_1280):
    from app.state.live_data import RunProgress
    win = window_at_1280
    progress = RunProgress(run_id="r-watched", config=SCRIPT)
    win.center.follow_run(progress, take_view=True, mark="run")
    progress.apply(Started(t=0.0, devices=[Device("cpu:0", "cpu", 0)]))   # a script's: no peaks yet
    for k, seconds in enumerate([0.02, 0.01, 0.01, 0.02]):
        progress.apply(Step(step=k, time_s=seconds, samples=16, throughput=16 / seconds,
                            flops={"cpu:0": 4e8} if k == 1 else None))
    win.plots.redraw(force=True)
    mfu = win.plots.series_plots["efficiency"]
    assert "cpu:0" not in mfu.series_keys()   # not known while it ran
    device = DeviceEfficiency("cpu:0", flops_per_step=4e8, step_s=0.015, busy_s=0.015,
                              measured_peak=Peak(1e11, "measured: test"))
    summary = RunSummary(run_id="r-watched", strategy="script", devices=["cpu:0"], steps=4, steps_measured=3,
                         step_time_s=MeanStd(0.015), efficiency=Efficiency([device]))
    progress.apply(Finished(t=1.0, status="finished", summary=summary))
    assert "cpu:0" in mfu.series_keys()
    _, shares = mfu.series_data("cpu:0")
    assert list(shares) == pytest.approx([20.0, 40.0, 40.0, 20.0])   # 4e8 FLOPs over each step, of 1e11 FLOP/s
    assert mfu.full_title.endswith("· of the measured peak, 100 GFLOP/s")   # what the percentages are of
