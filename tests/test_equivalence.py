"""Every strategy trains the same model as one device does (issue 2: "Must show")."""
from __future__ import annotations

import re

import pytest

from helpers import cli, small_mlp

CASES = {
    "data-parallel": ["--strategy", "data-parallel", "--devices", "cpu:2"],
    "ddp": ["--strategy", "ddp", "--devices", "cpu:2", "--peak", "datasheet"],
    "model-parallel": ["--strategy", "model-parallel", "--devices", "cpu:2"],
    "pipeline-gpipe": ["--strategy", "pipeline", "--devices", "cpu:2", "--micro-batches", "4"],
    "pipeline-1f1b": ["--strategy", "pipeline", "--devices", "cpu:2", "--micro-batches", "4", "--schedule", "1f1b"],
    "pipeline-3-stages": ["--strategy", "pipeline", "--devices", "cpu:3", "--micro-batches", "4"],
}


@pytest.fixture(scope="module")
def equivalence_db(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("equivalence") / "runs.sqlite3")


@pytest.fixture(scope="module")
def together(equivalence_db):
    """One device, every case and every multi-stage schedule, run at once: the parameters training ends with
    do not depend on timing (the runs share the cores, not their results)."""
    from helpers import cli_together
    db = equivalence_db
    runs = {"single": ["--strategy", "single", "--devices", "cpu:1"], **CASES,
            **{name: ["--strategy", "pipeline", "--devices", "cpu:2", "--micro-batches", "4", "--schedule", name]
               for name in MULTI_STAGE}}
    summaries = cli_together(*[["run", *small_mlp(*args, "--db", db, "--json")] for args in runs.values()])
    return dict(zip(runs, summaries, strict=True))


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def assert_matches(summary: dict, single: dict, name: str) -> None:
    assert summary["status"] == "finished", name
    assert summary["steps"] == 4
    for key in ("param_norm", "param_change"):
        # The change is what training did: a lost or doubled update moves it by its whole size.
        assert rel(summary[key], single[key]) <= 1e-4, (name, key)
    assert rel(summary["loss"]["last"], single["loss"]["last"]) <= 1e-4, name
    # the loss moved, so the comparison is of trained parameters, not initial ones
    assert summary["loss"]["first"] != summary["loss"]["last"], name


@pytest.mark.parametrize("case", list(CASES))
def test_strategy_matches_single_device(case, together):
    summary = together[case]
    assert_matches(summary, together["single"], case)
    if case == "pipeline-3-stages":
        assert len(summary["split"]) == 2 and len(summary["devices_busy"]) == 3


def test_a_stage_without_parameters_trains_like_one_device(tmp_path):
    """seed-toy split 1,2: the middle stage is a lone ReLU, with nothing for an optimizer to update."""
    args = ["--model", "seed-toy", "--steps", "3", "--warmup", "0", "--db", str(tmp_path / "runs.sqlite3"), "--json"]
    _, one = cli("run", *args, "--devices", "cpu:1", check_json=True)
    _, three = cli("run", *args, "--strategy", "pipeline", "--devices", "cpu:3", "--split", "1,2", check_json=True)
    assert three["status"] == "finished" and three["split"] == [1, 2]
    assert rel(three["param_norm"], one["param_norm"]) <= 1e-4
    assert rel(three["param_change"], one["param_change"]) <= 1e-4


MULTI_STAGE = ["interleaved1f1b", "loopedbfs", "interleavedzb", "zbv", "dualpipev"]


@pytest.mark.parametrize("name", MULTI_STAGE)
def test_every_multi_stage_schedule_trains_as_one_device(name, together):
    """Interleaved 1F1B, looped BFS and interleaved zero bubble with 2 stages per device in a loop; ZB-V and
    DualPipeV with 2 in a V: cpu:2, 4 stages of mlp, 4 micro-batches."""
    summary = together[name]
    assert_matches(summary, together["single"], name)
    assert len(summary["split"]) == 3, name  # 2 devices x 2 stages
    assert_plan_is_drawn(name, summary)
    # Each device's two stages keep activations for backward (counted on the stages' own modules).
    assert all(m["activations"] > 0 for m in summary["tensor_memory"]), (name, summary["tensor_memory"])


def assert_plan_is_drawn(name: str, summary: dict) -> None:
    """The run carries torch's own action list for its schedule (rank 0's ``pipeline_order``), and the plan
    figure draws every compute action of it, on the rank the schedule's placement gives its stage."""
    from engine.figures.schedule_plan import KIND_OF, schedule_plan_cells, schedule_plan_figure
    from engine.strategies.pipeline.schedules import SCHEDULE_INFO
    plan, devices = summary["plan"], summary["devices"]
    assert len(plan) == len(devices), name
    schedule = SCHEDULE_INFO[name]
    cells = schedule_plan_cells(plan, devices)
    for device, start, _, kind, stage, micro_batch in cells:
        assert devices[schedule.stage_device(stage, len(devices))] == device, (name, stage, device)
        letter = {kind: letter for letter, kind in KIND_OF.items()}[kind]
        assert f"{stage}{letter}{micro_batch}" in plan[devices.index(device)][int(start)], (name, start)
    forwards = [(stage, mb) for _, _, _, kind, stage, mb in cells if kind == "forward"]
    assert sorted(forwards) == sorted({(stage, mb) for stage in range(4) for mb in range(4)}), name  # each once
    split = schedule.splits_backward
    kinds = {kind for _, _, _, kind, _, _ in cells}
    assert kinds == ({"forward", "backward-input", "backward-weight"} if split else {"forward", "backward"}) or \
        (split and "backward" in kinds), (name, kinds)
    figure = schedule_plan_figure(plan, devices, name)
    assert len(figure.lanes.intervals) == len(cells) and figure.lanes.end == max(len(a) for a in plan)


def test_a_pipeline_counts_what_its_stages_send_and_receive(together):
    """GPipe on cpu:2, batch 64 in 4 micro-batches of mlp 64-wide activations: stage 0 sends each micro-batch's
    activation and receives its gradient, stage 1 the other way round; counted, the waits timed as "wait"."""
    message = 16 * 64 * 4
    for device in together["pipeline-gpipe"]["communication"]:
        traffic = {t["operation"]: t for t in device["traffic"]}
        assert set(traffic) == {"send", "recv"}
        assert traffic["send"]["bytes"] == traffic["recv"]["bytes"] == 4 * message
        assert traffic["send"]["calls"] == 4


@pytest.mark.parametrize("name", ["pipeline-gpipe", "pipeline-1f1b", "interleaved1f1b", "zbv", "dualpipev"])
def test_the_first_step_times_each_micro_batchs_work_as_the_next_does(name, together, equivalence_db):
    """torch's backward-shape inference calls the loss once more than there are micro-batches in the first
    step (engine/strategies/pipeline/scheduled_stages.py): not a micro-batch's forward, so not one on the timeline,
    whose slices the trace's flows pair. Every device's first step has the compute slices of the second."""
    from collections import Counter

    from engine.store import Store
    with Store(equivalence_db) as store:
        rows = store.timeline(together[name]["run_id"], steps=[0, 1])
    compute = ("forward", "backward", "backward-input", "backward-weight")
    counts = [Counter((device, kind) for step, device, kind, _, _ in rows if step == k and kind in compute)
              for k in (0, 1)]
    assert counts[0] and counts[0] == counts[1], (name, counts)
    # The trace's arrows, from the plan's pairing (the Plan tab's): each micro-batch's forward from each stage
    # to the next, its backward back, in the first step as in the second, several stages per device included.
    from engine.export.trace import trace_document
    summary = together[name]
    stages, micro_batches = len(summary["split"]) + 1, summary["micro_batches"]
    with Store(equivalence_db) as store:
        flows = [e for e in trace_document(store, summary["run_id"])["traceEvents"] if e["ph"] == "s"]
    for step in (0, 1):
        mine = [e["args"] for e in flows if e["args"]["step"] == step]
        assert len(mine) == 2 * (stages - 1) * micro_batches, (name, step, len(mine))
        for flow in mine:   # "0F1" to "1F1", "2B3" to "1B3": the next stage, the same micro-batch
            (a, kind, mb), (b, kind_to, mb_to) = (re.match(r"(\d+)([FBI])(\d+)", flow[k]).groups()
                                                  for k in ("from", "to"))
            assert mb == mb_to and int(b) - int(a) == (1 if kind == "F" else -1), (name, flow)
            assert (kind == "F") == (kind_to == "F"), (name, flow)   # a forward to a forward, a backward to one


def flops_by_device(summary: dict) -> dict[str, float]:
    return {d["device"]: d["flops_per_step"] for d in summary["efficiency"]["devices"]}


def test_every_strategy_counts_the_models_flops_once_over_its_devices(together):
    """Issue 33: a step's FLOPs by device (torch's formulas, engine/measure/flops.py): a replica does its share
    of the batch (data-parallel and ddp: half of one device's each), the stages of every schedule add up to the
    whole model's, each stage's device doing some."""
    whole = flops_by_device(together["single"])["cpu:0"]
    assert whole > 0
    for name, summary in together.items():
        counted = flops_by_device(summary)
        assert list(counted) == summary["devices"], name
        if name in ("data-parallel", "ddp"):
            assert all(count == whole / 2 for count in counted.values()), (name, counted)
        else:
            assert sum(counted.values()) == whole, (name, counted)
            assert all(count > 0 for count in counted.values()), (name, counted)


def test_mfu_against_the_datasheet_keeps_the_measured_peak_on_cpu_devices_and_says_so(together):
    """--peak datasheet (the ddp case): a CPU device has no datasheet figure, so its MFU stays against the
    measured peak, and the summary says which devices and why."""
    efficiency = together["ddp"]["efficiency"]
    assert efficiency["devices"][0]["peak_used"] == "datasheet"
    assert all(d["datasheet_peak"] is None and d["measured_peak"]["flops_per_s"] > 0 for d in efficiency["devices"])
    datasheet, energy = efficiency["notes"]
    assert datasheet.startswith("cpu:0, cpu:1: no datasheet figure") and "measured peak" in datasheet
    assert energy.startswith("energy: not measured on cpu:0, cpu:1")   # a CPU core has no counter of its own
    assert [n.split(":")[0] for n in together["single"]["efficiency"]["notes"]] == ["energy"]
    # --warmup 1 (these runs'): the counted step is measured, and the summary says so
    assert any(n.startswith("step 1's FLOPs were counted") for n in together["single"]["notes"])
