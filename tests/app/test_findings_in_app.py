"""The findings panel under the plots (app/views/findings_panel.py): a stored run's findings, opened as the history
opens one, the first readable without scrolling at 1280x800; a finding's devices highlighted while the cursor is on
it; the bubble box keeping to the bubble and its formula; two runs compared side by side, each named by the
micro-batches it ran. Runs are built, not run: each test takes a second or two."""
from __future__ import annotations

from PySide6 import QtCore, QtGui

from engine.config import ExperimentConfig
from engine.record.findings import findings
from engine.results import Bubble, DeviceKinds, MeanStd, RunSummary
from engine.results.read_facts import LoaderFacts, ScriptFacts
from engine.telemetry.summary import TelemetrySummary

DISTURBED = "other programs took 35% of cpu:1 during this run: its times are not comparable"



def watched_summary() -> RunSummary:
    """A watched script whose __getitem__ is slow, its DataLoader without workers: cpu:0 loads its data 98 % of each
    step (busy, as its busy share says), as the walk found it."""
    kinds = [DeviceKinds("cpu:0", 0.5, {"data": 0.49, "forward": 0.004, "backward": 0.004, "optimizer": 0.002})]
    summary = RunSummary(strategy="script", model="script: slow_loader.py", devices=["cpu:0"], steps=20,
                         steps_measured=19, step_time_s=MeanStd(0.5), throughput=MeanStd(64.0),
                         devices_busy=[0.995], bubble=Bubble(measured=0.005), time_by_kind=kinds,
                         script=ScriptFacts(model="Net", loader=LoaderFacts(batch_size=32)),
                         notes=["the script's steps are its optimizer's"],
                         telemetry=TelemetrySummary(disturbed=DISTURBED))
    found = findings(summary, script=True, world=1)
    return summary.replace(findings=found, diagnosis=found[0].text)


def stored(summary: RunSummary, label: str = "run 1", config: ExperimentConfig | None = None):
    from app.state.stored_run import RunData
    return RunData(run_id=label, label=label, status="finished", config=config or ExperimentConfig(strategy="script"),
                   summary=summary, error=None)


def test_a_watched_scripts_data_loading_is_the_first_finding_and_reads_without_scrolling(qtbot, window_at_1280):
    window_at_1280.center.show_stored_runs([stored(watched_summary())])   # as HistoryFlow shows a stored run
    panel = window_at_1280.plots.findings
    qtbot.waitUntil(panel.isVisible, timeout=2_000)
    first = panel.texts()[0]
    assert panel.rows[0].code == "data_load" and first.startswith("cpu:0 spends 98 % of each step loading its data "
                                                                  "in its own process")
    assert "num_workers, now 0" in first   # the script's own DataLoader words, not our flags
    assert panel.first_row_in_view() and panel.scroll.verticalScrollBar().value() == 0
    # the first row whole within the window at 1280x800
    top_left = panel.views[0].mapTo(window_at_1280, QtCore.QPoint(0, 0))
    assert top_left.y() + panel.views[0].height() < window_at_1280.height()
    codes = [row.code for row in panel.rows]
    assert "disturbed" in codes and "time_by_kind" in codes   # the telemetry's word, and the kinds of the step
    # the bubble box keeps to the bubble: no finding, diagnosis or disturbance in it
    bubble = window_at_1280.plots.bubble.formula.text()
    assert "loading its data" not in bubble and "other programs" not in bubble


def test_hovering_a_finding_marks_its_devices_and_its_why_names_the_figure(qtbot, window_at_1280):
    window_at_1280.center.show_stored_runs([stored(watched_summary())])
    panel = window_at_1280.plots.findings
    timeline = window_at_1280.plots.timeline
    view = panel.views[0]
    QtGui.QGuiApplication.sendEvent(view, QtGui.QEnterEvent(QtCore.QPointF(5, 5), QtCore.QPointF(5, 5),
                                                            QtCore.QPointF(5, 5)))
    assert [band.getRegion() for band in timeline._marks] == [(-0.5, 0.5)]   # cpu:0's lane
    QtGui.QGuiApplication.sendEvent(view, QtCore.QEvent(QtCore.QEvent.Type.Leave))
    assert timeline._marks == []
    assert panel.rows[0].why.figure == "timeline" and "data intervals" in view.why.toolTip()
    with qtbot.waitSignal(panel.sigWhy, timeout=1_000) as why:
        view.why.linkActivated.emit("why")
    assert why.args == ["timeline"]
    assert timeline.findChild(QtCore.QObject, "flash") is not None   # the timeline outlined a moment


def test_two_runs_compared_show_both_timelines_and_bubbles_named_by_their_micro_batches(qtbot, window_at_1280):
    def summary(strategy: str, m: int | None, bubble: float, theory: float) -> RunSummary:
        return RunSummary(strategy=strategy, devices=["cpu:0", "cpu:1"], split=[2], micro_batches=m, steps=8,
                          steps_measured=6, devices_busy=[0.5, 0.5], bubble=Bubble(measured=bubble, theory=theory),
                          step_time_s=MeanStd(0.1), throughput=MeanStd(640.0))
    naive = stored(summary("model-parallel", None, 0.504, 0.5), "run 1",
                   ExperimentConfig(strategy="model-parallel", devices="cpu:2"))
    pipeline = stored(summary("pipeline", 4, 0.3, 0.2), "run 2",
                      ExperimentConfig(strategy="pipeline", devices="cpu:2", micro_batches=4))
    window_at_1280.center.show_stored_runs([naive, pipeline])
    row = window_at_1280.plots.timeline_row
    qtbot.waitUntil(row.compared, timeout=2_000)
    first, second = row.runs
    assert first.name.text() == "model-parallel m=1" and second.name.text() == "pipeline m=4"
    assert first.bubble.title.text() == "Bubble of model-parallel m=1"
    assert (first.bubble.measured.text(), second.bubble.measured.text()) == ("50.4%", "30.0%")
    assert (first.bubble.theory.text(), second.bubble.theory.text()) == ("50.0%", "20.0%")
    # one run again: one timeline, unnamed
    window_at_1280.center.show_stored_runs([pipeline])
    assert not row.compared() and not first.name.isVisible() and first.bubble.measured.text() == "30.0%"
