"""An engine run's findings beside a script's (engine/record/findings.py): a split whose stages are not balanced,
a bubble over its schedule's theory, memory near the device's limit, a rank loading its data itself against one
waiting for its loader's workers, and none of them where the figures are as they should be. Summaries built
directly, or from step reports through the worker's merger and totals: nothing runs."""
from __future__ import annotations

import pytest

from engine.config import ExperimentConfig
from engine.record.findings import bubble_above_theory, findings, memory_near_limit, unbalanced_stages, with_telemetry
from engine.record.step_merger import StepMerger
from engine.record.summary import summarize
from engine.record.time_by_kind import input_share
from engine.record.totals import RunTotals
from engine.results import Bubble, RunSummary
from engine.results.read_facts import LoaderFacts, ScriptFacts
from engine.telemetry.summary import TelemetrySummary
from engine.wire.rank import StepReport

pytestmark = pytest.mark.quick
GIB = 2 ** 30


def test_a_split_whose_stages_work_unevenly_names_the_busiest_and_the_idlest_stage():
    uneven = RunSummary(strategy="model-parallel", devices=["cpu:0", "cpu:1"], steps=4, stage_busy=[0.7, 0.35],
                        stage_balance=0.5)
    found = unbalanced_stages(uneven)
    assert found.code == "unbalanced_stages" and found.devices == ["cpu:0", "cpu:1"]
    assert "cpu:0 works 70 %" in found.text and found.share == pytest.approx(0.35)
    assert unbalanced_stages(uneven.replace(stage_busy=[0.5, 0.45], stage_balance=0.9)) is None
    assert "unbalanced_stages" in [f.code for f in findings(uneven, script=False, world=2)]


def test_a_bubble_over_its_theory_is_a_finding_and_the_naive_splits_half_is_not():
    pipeline = RunSummary(strategy="pipeline", schedule="gpipe", devices=["cpu:0", "cpu:1"], steps=4,
                          bubble=Bubble(measured=0.35, theory=0.2, formula="(p−1)/(m+p−1): p=2 stages, m=4"))
    found = bubble_above_theory(pipeline)
    assert found.code == "bubble_above_theory" and "35 %" in found.text and "20 %" in found.text
    assert found.share == pytest.approx(0.15)
    naive = pipeline.replace(bubble=Bubble(measured=0.504, theory=0.5))   # 50.4 % against 50 %: as it should be
    assert bubble_above_theory(naive) is None
    assert bubble_above_theory(pipeline.replace(bubble=Bubble(measured=0.4))) is None   # no theory: nothing to say


def test_memory_near_the_limit_counts_a_gpu_alone_and_cpu_devices_together():
    telemetry = TelemetrySummary(mem_peak_bytes=[int(7.6 * GIB), 3 * GIB, 3 * GIB])
    summary = RunSummary(devices=["cuda:0", "cpu:0", "cpu:1"], steps=4, telemetry=telemetry)
    found = memory_near_limit(summary, {"cuda:0": 8 * GIB, "cpu:0": 6 * GIB, "cpu:1": 6 * GIB})
    assert [f.devices for f in found] == [["cuda:0"], ["cpu:0", "cpu:1"]]
    assert found[0].severity == "warning" and found[1].severity == "problem"   # 95 % and 100 %
    assert memory_near_limit(summary, {"cuda:0": 16 * GIB, "cpu:0": 64 * GIB, "cpu:1": 64 * GIB}) == []
    assert memory_near_limit(summary, {}) == []   # no limits known: nothing said
    listed = with_telemetry(summary, memory_limits={"cuda:0": 8 * GIB}).findings
    assert [f.code for f in listed] == ["memory_near_limit"]


def watched_slow_loader(kind: str, workers: int) -> RunSummary:
    """A watched script's summary, as the worker makes it from its one rank's step reports: each 100 ms step spends
    60 ms taking its batch from a DataLoader with ``workers`` workers (timed as ``kind``, engine/watch/script_facts.py
    fetch_kind), then 40 ms of forward, backward and optimizer."""
    merger, totals = StepMerger(1, ["cpu:0"], origin=0.0, loss_parts=False), RunTotals(["cpu:0"], warmup=1)
    for k in range(5):
        t = 0.1 * k
        intervals = [[kind, t, t + 0.06], ["forward", t + 0.06, t + 0.08], ["backward", t + 0.08, t + 0.095],
                     ["optimizer", t + 0.095, t + 0.1]]
        totals.add(merger.add(0, StepReport(k, t, t + 0.1, {"cpu:0": intervals}, 0.5, 32)))
    facts = ScriptFacts(model="Net", loader=LoaderFacts(batch_size=32, num_workers=workers))
    return summarize(run_id="r", status="finished", config=ExperimentConfig(strategy="script"), devices=["cpu:0"],
                     split=None, micro_batches=1, batch_size=32, totals=totals, param_sq_parts=[],
                     data_parallel=False, script=facts)


def test_a_rank_loading_its_data_itself_is_busy_on_it_and_one_waiting_for_its_workers_idles():
    """num_workers=0: the rank runs __getitem__ itself, busy all its step, the finding saying it loads (the fix:
    workers); with workers the same time is a wait, idle: the bubble and the finding's share are that time."""
    loading = watched_slow_loader("data", 0)
    (kinds,) = loading.time_by_kind
    (first, *_) = loading.findings
    assert loading.devices_busy == [pytest.approx(1.0)] and loading.bubble.measured == pytest.approx(0.0, abs=1e-9)
    assert kinds.idle_share == pytest.approx(0.0, abs=1e-9)
    assert first.code == "data_load" and first.share == pytest.approx(kinds.share("data"))
    assert first.text.startswith(f"cpu:0 spends {round(100 * kinds.share('data'))} % of each step loading its data "
                                 "in its own process") and "num_workers, now 0" in first.text
    assert "waits" not in first.text and "data_wait" not in [f.code for f in loading.findings]

    waiting = watched_slow_loader("data-wait", 2)
    (kinds,) = waiting.time_by_kind
    (first, *_) = waiting.findings
    busy = waiting.devices_busy[0]
    assert first.code == "data_wait" and "data_load" not in [f.code for f in waiting.findings]
    # one figure: what the rank waited is its idle time, the bubble, and the finding's share
    assert first.share == pytest.approx(kinds.share("data-wait")) == pytest.approx(kinds.idle_share)
    assert waiting.bubble.measured == pytest.approx(1 - busy) == pytest.approx(kinds.idle_share)
    assert first.text.startswith(f"cpu:0 waits on data (its loader's worker processes) "
                                 f"{round(100 * kinds.idle_share)} % of each step, idle meanwhile")
    assert "num_workers, now 2" in first.text and "prefetch_factor" in first.text
    # the same time on the input either way
    assert input_share(kinds) == pytest.approx(input_share(loading.time_by_kind[0]))
    assert not any(f.code == "peer_wait" for f in waiting.findings)


def test_an_engine_runs_wait_for_its_loaders_workers_is_no_wait_for_a_peer():
    """An engine run's idle time is a peer's wait (its timers cover its work), but the wait for its loader's
    workers: that is data_wait, in the engine's own options."""
    from engine.results import DeviceKinds
    kinds = [DeviceKinds(d, 0.1, {"data-wait": 0.05, "forward": 0.05}, idle_s=0.05) for d in ("cpu:0", "cpu:1")]
    summary = RunSummary(strategy="ddp", devices=["cpu:0", "cpu:1"], steps=4, time_by_kind=kinds)
    codes = [f.code for f in findings(summary, script=False, world=2)]
    assert codes.count("data_wait") == 2 and "peer_wait" not in codes
    (wait, *_) = findings(summary, script=False, world=2)
    assert "--loader-workers" in wait.text


def test_kinds_longer_than_the_step_are_a_finding_never_shares():
    """A watched DDP script's kinds once added to 2.11 s in a 0.98 s step (issue 54): the finding says so, and
    neither the findings panel's time-by-kind line nor the CLI's table gives that device's shares as figures."""
    from app.state.finding_rows import time_by_kind_text
    from engine.record.time_by_kind import table
    from engine.results import DeviceKinds
    over = DeviceKinds("cpu:0", 0.98, {"forward": 0.71, "backward": 1.4}, idle_s=0.0)
    fine = DeviceKinds("cpu:1", 0.98, {"forward": 0.3, "backward": 0.6}, idle_s=0.08)
    summary = RunSummary(run_id="r", strategy="script", devices=["cpu:0", "cpu:1"], steps=4, time_by_kind=[over, fine])
    assert [f.code for f in findings(summary, script=True, world=2) if f.code == "kinds_exceed_step"] == \
        ["kinds_exceed_step"]
    line = time_by_kind_text(summary)
    assert "cpu:0: kinds add up to more than its step" in line and "forward 72 %" not in line, line
    assert "cpu:1 backward 61 %, forward 31 %" in line, line
    rows = table([over, fine])
    assert rows[1].endswith("kinds exceed the step: see its finding") and "exceed" not in rows[2], rows
