"""Experiments from the menu, their result view and the history's experiment list (issue 5); an experiment
is a live run, point after point: header, memory, timeline and bubble follow the point that runs."""
from __future__ import annotations

from PySide6 import QtWidgets

from engine.events import Finished, Started
from engine.results import Step
from tests.app.app_helpers import set_small_mlp

EXPERIMENT_TIMEOUT_MS = 120_000
TINY = dict(width=32, depth=4, batch_size=32, steps=3)


def test_schedules_preset_runs_from_the_menu_and_shows_its_result(qtbot, window):
    # Three blocks: too few for the schedules that cut 2 devices x 2 stages, which the preset leaves out.
    set_small_mlp(window, strategy="model-parallel", **dict(TINY, depth=2))
    menu = window.experiments.menu
    assert menu.preset_actions["schedules"].statusTip().startswith("model-parallel vs every pipeline schedule")
    # Named for people, the id the command line takes in the tip.
    assert menu.preset_actions["schedules"].text() == "Compare pipeline schedules"
    assert menu.preset_actions["schedules"].toolTip().endswith("Command line: main.py experiment schedules")
    menu.repeats_spin.setValue(1)
    progress = []
    window.experiments.client.sigProgress.connect(lambda k, n, label, _c: progress.append(
        (k, n, label, window.progress_bar.format())))
    steps_seen = []
    window.experiments.client.sigEvents.connect(
        lambda events: steps_seen.extend(e for e in events if isinstance(e, Step)))
    # What the live view shows of each point: read after the window handled the events (connected later).
    shown: dict[str, dict] = {}
    idle_hint = window.plots.timeline.placeholder.toPlainText()
    plots = window.plots

    def on_progress(k, n, label, run):
        shown[label] = {"hint": plots.timeline.placeholder.toPlainText(), "header": plots.mode_label.text(),
                        "status": window.status_label.text()}

    def on_events(events):
        label = window.experiments.client.progress.label
        for event in events:
            if isinstance(event, Started):
                shown[label]["started header"] = plots.mode_label.text()
            elif isinstance(event, Step):
                shown[label]["time left"] = window.time_left.text()
            elif isinstance(event, Finished) and event.run_id:   # the point's run is stored
                shown[label].update(memory=set(plots.series_plots["memory"].series_keys()),
                                    lanes=list(plots.timeline.devices),
                                    rows={row[1] for row in plots.timeline.rows}, theory=plots.bubble.theory.text())

    window.experiments.client.sigProgress.connect(on_progress)
    window.experiments.client.sigEvents.connect(on_events)

    with qtbot.waitSignal(window.sigExperimentFinished, timeout=EXPERIMENT_TIMEOUT_MS) as done:
        menu.preset_actions["schedules"].trigger()
        assert not window.run_action.isEnabled() and window.stop_action.isEnabled()
        assert not menu.preset_actions["compare-strategies"].isEnabled()  # one thing at a time
    result = done.args[0]
    assert result.status == "finished", (result, window.log_view.toPlainText()[-2000:])
    labels = [p.label for p in result.points]
    assert labels == ["model-parallel", "gpipe", "1f1b"]
    assert [(k, n, label) for k, n, label, _ in progress] == [(1, 3, "model-parallel"), (2, 3, "gpipe"),
                                                              (3, 3, "1f1b")]
    assert progress[1][3] == "run 2 of 3: gpipe"        # the progress bar says it
    assert len(steps_seen) == 9                          # the live plots got every run's steps
    assert all(p.step_time_s.std is not None for p in result.points)
    # Each point ran live: the header said which point of how many, the timeline what the run did while it
    # started (not the idle "run an experiment" line), the memory and the timeline had the point's devices.
    gpipe = shown["gpipe"]
    assert gpipe["header"].startswith("Live: Compare pipeline schedules · point 2 of 3: gpipe")
    assert gpipe["started header"].startswith("Live: Compare pipeline schedules · point 2 of 3: gpipe")
    assert gpipe["status"].startswith("Compare pipeline schedules · point 2 of 3: gpipe · starting")
    assert all(s["hint"] != idle_hint and s["hint"].startswith("starting: ") for s in shown.values()), shown
    for label in labels:
        assert {"cpu:0", "cpu:1"} <= shown[label]["memory"], (label, shown[label])
        assert shown[label]["lanes"] == ["cpu:0", "cpu:1"] and shown[label]["rows"] == {"cpu:0", "cpu:1"}
    assert shown["1f1b"]["time left"].endswith(" left of 3 runs")   # the experiment's own time left, not the run's
    assert shown["model-parallel"]["time left"].endswith(" left of this run")   # until a run's time is known
    assert gpipe["theory"] == "20.0%"                   # (p-1)/(m+p-1), p=2, m=4: the pipeline point's theory
    # At the end the header and the status line say how the experiment ended, not its last run.
    # "best X", or "tied: X, Y (within their spread)"
    ended = f"Compare pipeline schedules finished: 3 points, {result.verdict()}"
    assert plots.mode_label.text() == f"Live: this machine's telemetry · {ended}"
    assert window.status_label.text().startswith(ended)

    # The result view is in front, with a bar per point and a table row per point.
    assert window.center_tabs.currentWidget() is window.center.results
    assert window.center.results.point_labels() == labels
    assert window.center.results.table.rowCount() == 3
    assert window.center.results.experiment_id == result.experiment_id
    assert result.verdict() in window.center.results.title.text()
    assert window.center.results.title.text().startswith("Compare pipeline schedules · finished")
    assert window.center.results.best_marks() == {"bars": result.winner, "table": result.winner, "sweep": None}
    assert all(text.strip("…\n") for text in window.center.results.bars.tick_texts)   # every bar labelled
    assert "finished" in window.status_label.text() and window.run_action.isEnabled()

    # The history lists the experiment, and its runs with their point.
    history = window.history
    assert history.experiments.ids[0] == result.experiment_id
    assert history.experiments.item(0, 1).text() == "Compare pipeline schedules"
    experiment_col = [history.table.horizontalHeaderItem(c).text()
                      for c in range(history.table.columnCount())].index("experiment")
    assert {history.table.item(r, experiment_col).text() for r in range(3)} == \
        {f"Compare pipeline schedules: {label}" for label in ("model-parallel", "gpipe", "1f1b")}
    schedule_col = [history.table.horizontalHeaderItem(c).text()
                    for c in range(history.table.columnCount())].index("schedule")
    assert sorted(history.table.item(r, schedule_col).text() for r in range(3)) == ["1f1b", "gpipe", "—"]
    # Selecting it (after looking at something else) shows its result again.
    window.center_tabs.setCurrentWidget(window.plots)
    history.show_page("experiments")
    history.experiments.clearSelection()
    with qtbot.waitSignal(window.sigExperimentShown, timeout=5_000) as shown:
        history.experiments.selectRow(0)
    assert shown.args[0] == result.experiment_id
    assert window.center_tabs.currentWidget() is window.center.results
    assert window.export_target() == ("experiment", result.experiment_id)


def test_closing_during_an_experiment_asks_stops_and_keeps_the_finished_points(qtbot, window, monkeypatch):
    asked = []

    def answer(*args, **kwargs):
        asked.append(args[2] if len(args) > 2 else "")
        return QtWidgets.QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QtWidgets.QMessageBox, "question", answer)
    set_small_mlp(window, strategy="model-parallel", **TINY)
    window.experiments.menu.repeats_spin.setValue(1)
    # Close as the second run begins: the first point is finished and must be kept.
    window.experiments.client.sigProgress.connect(lambda k, *_: k == 2 and window.close())
    with qtbot.waitSignal(window.sigExperimentFinished, timeout=EXPERIMENT_TIMEOUT_MS) as done:
        window.experiments.menu.preset_actions["schedules"].trigger()
    result = done.args[0]
    assert asked and "experiment is in progress" in asked[0]
    assert result.status == "stopped"
    assert [p.label for p in result.points] == ["model-parallel"]
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5_000)
    assert window._closed


def test_results_view_draws_bars_table_and_a_sweep_with_the_best_marked(qtbot, qapp_configured):
    from app.views.experiment_results import ExperimentResultsView
    from engine.results import ExperimentResult, from_json
    view = ExperimentResultsView()
    qtbot.addWidget(view)

    def point(size, ms, std):
        return {"label": f"split size {size}", "strategy": "pipeline", "x": size, "devices": ["cpu:0", "cpu:1"],
                "split": [2], "micro_batches": 32 // size, "step_time_s": {"mean": ms / 1000, "std": std / 1000},
                "throughput": {"mean": 32 / (ms / 1000), "std": 10.0}, "bubble": {"measured": 0.3, "theory": 0.2},
                "stage_busy": [0.6, 0.8], "stage_balance": 0.75, "run_ids": ["a", "b", "c"],
                "mfu": 0.4 + size / 100}

    failed = {"label": "split size 1", "strategy": "pipeline", "x": 1, "step_time_s": None, "throughput": None,
              "error": "rank 1 failed: boom", "run_ids": ["d"]}
    result = {"experiment_id": "exp-1", "name": "split-size", "status": "finished", "best": "split size 8",
              "points": [failed, point(4, 9.0, 0.5), point(8, 7.5, 0.3), point(16, 8.2, 0.4)]}
    view.show_result(from_json(ExperimentResult, result), "pipeline over micro-batch sizes")
    assert view.point_labels() == ["split size 4", "split size 8", "split size 16"]  # a failed point has no bar
    assert view.bars.means == [9.0, 7.5, 8.2] and view.bars.stds == [0.5, 0.3, 0.4]
    assert not view.sweep.isHidden()
    assert view.sweep.best_xy == (8.0, 7.5)
    # Its axes are the figure definitions' the exports draw (engine.figures), the sweep's named by its preset.
    from engine.figures import SWEEP_AXES
    assert view.sweep.getPlotItem().getAxis("bottom").labelText == SWEEP_AXES["split-size"]
    assert view.bars.getPlotItem().getAxis("left").labelText == "step time (ms)"
    # Ticks at the swept sizes only (pyqtgraph's own would put 2.5-step ticks between them).
    assert view.sweep.getPlotItem().getAxis("bottom")._tickLevels == [[(4.0, "4"), (8.0, "8"), (16.0, "16")]]
    from app.views.experiment_results import _tick_each
    assert _tick_each([1.0, 2.0, 3.0, 4.0, 5.0])
    assert not _tick_each([1.0, 3.0, 5.0, 8.0, 10.0, 12.0, 20.0, 40.0, 60.0])  # crowded: pyqtgraph's own ticks
    assert not _tick_each([0.5, 1.0])
    assert view.table.rowCount() == 4
    assert view.table.item(2, 0).text() == "★ split size 8"
    assert "boom" in view.table.item(0, view.table.columnCount() - 1).text()
    assert "7.50 ± 0.30" in view.table.item(2, 5).text()
    headers = [view.table.horizontalHeaderItem(c).text() for c in range(view.table.columnCount())]
    assert view.table.item(2, headers.index("stage balance")).text() == "0.75 (60% | 80%)"
    assert view.table.item(0, headers.index("stage balance")).text() == "—"
    assert view.table.item(2, headers.index("MFU")).text() == "48.0%"   # Efficiency.mfu, its runs' mean
    assert view.table.item(2, headers.index("samples/J")).text() == "—"  # no energy counter on CPU devices
    assert "by MFU: split size 16 > split size 8 > split size 4" in view.subtitle.text()   # beside the fastest
    # A comparison without a swept number has bars and no sweep.
    view.show_result(from_json(ExperimentResult, {"experiment_id": "exp-2", "name": "compare-strategies",
                                                  "best": "pipeline",
                                                  "points": [dict(point(4, 9.0, 0.5), label="pipeline", x=None)]}))
    assert view.sweep.isHidden() and view.point_labels() == ["pipeline"]
    # Every bar keeps its label whole where there is room (on one line or two; tests/app/
    # test_results_history_help.py narrows the view until they are elided).
    view.show_result(from_json(ExperimentResult, {
        "experiment_id": "exp-3", "name": "split-point", "best": "split 4",
        "points": [dict(point(4, 9.0, 0.5), label="split 4", x=4),
                   dict(point(4, 9.5, 0.5), label="balanced (automatic)", x=None)]}))
    texts = view.bars.tick_texts
    assert view.bars.getPlotItem().getAxis("bottom")._tickLevels == [list(enumerate(texts))]
    assert [text.replace("\n", " ") for text in texts] == ["split 4", "balanced (automatic)"]


def test_the_input_pipeline_preset_runs_from_the_menu_and_plots_the_input_wait_over_workers(qtbot, window,
                                                                                          tmp_path):
    """The loader's workers swept for the panel's model on one device: throughput and the input wait each
    over the workers, the best marked, and the wait's plot exported as its table."""
    set_small_mlp(window, strategy="single", devices="cpu:1", **TINY)
    menu = window.experiments.menu
    assert "DataLoader with 0, 1, 2 and 4 workers" in menu.preset_actions["input-pipeline"].statusTip()
    menu.repeats_spin.setValue(1)
    with qtbot.waitSignal(window.sigExperimentFinished, timeout=EXPERIMENT_TIMEOUT_MS) as done:
        menu.preset_actions["input-pipeline"].trigger()
    result = done.args[0]
    assert result.status == "finished", (result, window.log_view.toPlainText()[-2000:])
    assert [p.x for p in result.points][:2] == [0, 1] and all(p.input_wait for p in result.points)
    view = window.center.results
    assert not view.sweep.isHidden() and not view.input_wait.isHidden() and view.bars.isHidden()   # the table's
    assert view.best_marks()["sweep"] == result.winner
    path = view.input_wait.export("csv", tmp_path / "wait.csv")
    rows = path.read_text().splitlines()
    assert rows[0].startswith("label,strategy,loader workers,input wait") and len(rows) == 1 + len(result.points)
