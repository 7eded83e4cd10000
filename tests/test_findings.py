"""An engine run's findings beside a script's (engine/record/findings.py): a split whose stages are not balanced,
a bubble over its schedule's theory, memory near the device's limit, and none of them where the figures are as
they should be. Summaries built directly: nothing runs."""
from __future__ import annotations

import pytest

from engine.record.findings import bubble_above_theory, findings, memory_near_limit, unbalanced_stages, with_telemetry
from engine.results import Bubble, RunSummary
from engine.telemetry.summary import TelemetrySummary

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
