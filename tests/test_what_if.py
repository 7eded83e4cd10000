"""What-if (issue 15): the step time of schedules and micro-batch counts not run, simulated from one run."""
from __future__ import annotations

import json
import statistics

import pytest

from engine.planner.what_if import TRUST, TRUST_DETAIL, predict, unpredictable
from engine.results import MeanStd, RunSummary
from engine.store import Store
from engine.strategies.pipeline.schedule_actions import actions, order, simulate, tick_plan
from engine.strategies.pipeline.schedules import SCHEDULE_INFO
from helpers import cli

EVEN = {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}   # per device; a device's V stages share it


def even_step(schedule: str, p: int, v: int, m: int) -> float:
    return simulate(actions(SCHEDULE_INFO[schedule], p, v, m), lambda action: EVEN[action.kind] / v)[0]


@pytest.mark.parametrize("schedule,p,m", [("gpipe", 2, 1), ("gpipe", 2, 4), ("gpipe", 3, 8), ("gpipe", 4, 4),
                                          ("1f1b", 2, 4), ("1f1b", 3, 8), ("1f1b", 4, 4)])
def test_even_stages_give_the_textbook_bubble(schedule, p, m):
    """Stages of equal work with nothing else: (m+p-1)(F+B) a step, so the idle share is (p-1)/(m+p-1)."""
    assert even_step(schedule, p, 1, m) == pytest.approx((m + p - 1) * 3.0)


def test_an_overlapped_pairs_outputs_reach_another_device_when_the_pair_ends():
    """DualPipeV's overlapped forward and backward: torch's runtime sends both parts' outputs after the pair, so
    the next device's forward waits for the pair's second part. Marked on every pair of torch's own DualPipeV list
    but its last part."""
    from engine.strategies.pipeline.schedule_actions import Action
    pair = [Action("F", 0, 0, held=True), Action("F", 0, 1)]   # micro-batch 0's forward, then another's
    _, starts = simulate([pair, [Action("F", 1, 0)]], lambda action: 1.0)
    assert starts[Action("F", 1, 0)] == 2.0   # after the pair (0 to 2), not after its first part (0 to 1)
    unheld = [[Action("F", 0, 0), Action("F", 0, 1)], [Action("F", 1, 0)]]
    assert simulate(unheld, lambda action: 1.0)[1][Action("F", 1, 0)] == 1.0
    dualpipev = actions(SCHEDULE_INFO["dualpipev"], 2, 2, 8)
    assert any(a.held for device in dualpipev for a in device)
    assert not any(a.held for device in actions(SCHEDULE_INFO["zbv"], 2, 2, 8) for a in device)


@pytest.mark.parametrize("schedule", ["interleaved1f1b", "loopedbfs"])
@pytest.mark.parametrize("p,v,m", [(2, 2, 4), (2, 2, 8), (4, 2, 8), (2, 3, 4), (4, 2, 4)])
def test_torchs_interleaved_orders_played_out_give_the_interleaved_bubble(schedule, p, v, m):
    """torch's own action lists for V stages per device, each stage 1/V of its device's work: the idle share
    is (p-1)/(V*m+p-1), the formula the bubble box names; the zero-bubble schedules beat it."""
    step = even_step(schedule, p, v, m)
    assert 1 - 3 * m / step == pytest.approx((p - 1) / (v * m + p - 1))
    if v == 2:
        for zero_bubble in ("interleavedzb", "zbv"):
            assert even_step(zero_bubble, p, v, m) < step


def test_1f1b_runs_each_micro_batch_forward_before_its_backward_and_in_order():
    for stage in range(3):
        actions = order("1f1b", stage, 3, 6)
        assert sorted(actions) == sorted([("F", j) for j in range(6)] + [("B", j) for j in range(6)])
        for j in range(6):
            assert actions.index(("F", j)) < actions.index(("B", j))
        # at most p - s micro-batches in flight: 1F1B's memory bound
        in_flight = 0
        for kind, _ in actions:
            in_flight += 1 if kind == "F" else -1
            assert in_flight <= 3 - stage


def test_the_one_stage_per_device_plans_wait_where_their_inputs_are_not_there_yet():
    """GPipe on 2 stages, 4 micro-batches: stage 1 starts a tick late, stage 0 waits for the first gradient."""
    assert tick_plan("gpipe", 2, 4) == [["0F0", "0F1", "0F2", "0F3", "", "", "0B0", "0B1", "0B2", "0B3"],
                                        ["", "1F0", "1F1", "1F2", "1F3", "1B0", "1B1", "1B2", "1B3"]]
    one_f_one_b = tick_plan("1f1b", 2, 4)
    assert one_f_one_b[1] == ["", "1F0", "1B0", "1F1", "1B1", "1F2", "1B2", "1F3", "1B3"]
    assert sorted(one_f_one_b[0]) == sorted(["", "", *(f"0F{j}" for j in range(4)), *(f"0B{j}" for j in range(4))])


def test_predict_fits_the_runs_own_step_and_scales_the_micro_batches():
    rows = []
    for step in range(4):  # two stages; forward 4 ms, backward 8 ms per step on each, in 4 micro-batches
        for device in ("cpu:0", "cpu:1"):
            rows += [(step, device, "forward", 0.0, 0.004), (step, device, "backward", 0.01, 0.018),
                     (step, device, "optimizer", 0.02, 0.021)]
    summary = RunSummary(strategy="pipeline", devices=["cpu:0", "cpu:1"], split=[4], micro_batches=4,
                         schedule="gpipe", batch_size=64, step_time_s=MeanStd(0.020))
    predictions = predict(summary, rows, warmup=1)
    own = next(p for p in predictions if p.measured)
    assert (own.schedule, own.micro_batches) == ("gpipe", 4)
    assert own.step_time_s == pytest.approx(0.020, rel=1e-3)   # the fit reproduces the measured step
    by = {(p.schedule, p.micro_batches): p for p in predictions}
    assert by[("gpipe", 1)].step_time_s > by[("gpipe", 4)].step_time_s  # the naive split waits most
    assert ("1f1b", 1) not in by  # 1F1B needs a micro-batch per stage
    assert ("dualpipev", 2) not in by and ("dualpipev", 4) in by   # DualPipeV one per stage, 2 x 2 here
    assert 0 < by[("gpipe", 4)].bubble < by[("gpipe", 1)].bubble < 1  # micro-batches fill the pipeline
    # every schedule torch has, the multi-stage ones at two stages per device
    assert {p.schedule for p in predictions} == set(SCHEDULE_INFO)
    # a step that load slowed (twice the compute, three times the step) moves nothing: the median step's
    slowed = rows + [(4, d, kind, 2 * t0, 2 * t1) for _, d, kind, t0, t1 in rows[:6]]
    robust = predict(summary, slowed, warmup=1, step_times=[0.020, 0.020, 0.020, 0.060])
    assert [p.step_time_s for p in robust] == pytest.approx([p.step_time_s for p in predictions], rel=1e-9)
    assert by[("interleaved1f1b", 4)].stages_per_device == 2 and by[("gpipe", 4)].stages_per_device == 1
    replicated = RunSummary(strategy="ddp", devices=["cpu:0", "cpu:1"], batch_size=64, step_time_s=MeanStd(0.02))
    assert "not" in unpredictable(replicated) and predict(replicated, rows, warmup=1) == []
    shared = summary.replace(devices=["cuda:0", "cuda:0"])
    assert "one process per device" in unpredictable(shared)
    assert unpredictable(summary.replace(devices=["cuda:0", "cuda:1"])) is None   # a pipeline over two GPUs
    naive_on_gpus = summary.replace(strategy="model-parallel", devices=["cuda:0", "cuda:1"], micro_batches=None)
    assert "one process per device" in unpredictable(naive_on_gpus)   # the tutorial's one process
    torch_free = predict(summary, rows, warmup=1, multi_stage=False)
    assert {p.schedule for p in torch_free} == {"gpipe", "1f1b"}
    assert torch_free == [p for p in predictions if p.schedule in ("gpipe", "1f1b")]


@pytest.mark.solo   # compares figures that load moves: `make test` runs it alone
def test_predictions_from_a_real_run_land_near_the_measured_steps(fresh_store):
    """GPipe at m=4 on cpu:2 predicts 1F1B at m=8 and ZB-V at m=4; each is then run. `make bench`
    measures the error on the issue's model (README); here a sanity bound only a broken model crosses: a
    prediction within a factor of 2 of the run (a reference run disturbed by the machine's load put one 50 %
    off in a CI run; the bench's errors are within 20 %)."""
    # steps of ~0.1 s: on 20 ms ones the hand-overs' share, and a hiccup in the reference run, swing it by 40 %
    base = ["run", "--model", "mlp", "--width", "512", "--depth", "8", "--batch-size", "1024", "--steps", "8",
            "--warmup", "2", "--strategy", "pipeline", "--devices", "cpu:2", "--json"]
    _, ref = cli(*base, "--micro-batches", "4", check_json=True)
    assert ref["plan"] == tick_plan("gpipe", 2, 4)  # the run carries its schedule's plan
    assert {p["schedule"] for p in ref["predictions"]} == {"gpipe", "1f1b"}   # run's own: torch-free ones
    every = cli("what-if", ref["run_id"], "--json")   # every schedule, later, from the store
    assert every.returncode == 0
    predictions = json.loads(every.stdout)
    assert [p for p in predictions if p["schedule"] in ("gpipe", "1f1b")] == ref["predictions"]
    predicted = {(p["schedule"], p["micro_batches"]): p["step_time_s"] for p in predictions}
    with Store(fresh_store) as store:   # the fit reproduces the run's median measured step
        median_step = statistics.median(store.step_times(ref["run_id"], range(2, 8)))
    assert predicted[("gpipe", 4)] == pytest.approx(median_step, rel=0.01)
    # every device measured what a split backward adds (the probe after the last step), and the table says it
    assert len(ref["split_backward_extra_s"]) == 2 and all(isinstance(x, float) for x in ref["split_backward_extra_s"])
    # and of it, the part paid at any micro-batch size (the probe's half-sized micro-batch tells)
    assert all(0 <= fixed <= extra
               for fixed, extra in zip(ref["split_backward_fixed_s"], ref["split_backward_extra_s"], strict=True))
    # and what the two devices' sending to each other at once costs beyond one way (exchange_probe.py)
    assert isinstance(ref["two_way_extra_s"], float) and ref["two_way_extra_s"] >= 0
    table = cli("what-if", ref["run_id"])
    assert "a backward split into input and weight gradient costs cpu:0" in table.stdout
    assert "two devices sending hand-overs to each other at once take" in table.stdout
    assert f"what-if: {TRUST}:" in table.stdout and f"({TRUST_DETAIL})" in table.stdout   # how far to trust it
    unknown = cli("what-if", "no-such-run")
    assert unknown.returncode == 2 and "no run 'no-such-run'" in unknown.stderr
    for schedule, m in (("zbv", 4), ("1f1b", 8)):   # zbv: torch's own action list, its backward split
        _, run = cli(*base, "--micro-batches", str(m), "--schedule", schedule, check_json=True)
        assert 0.5 <= predicted[(schedule, m)] / run["step_time_s"]["mean"] <= 2, (schedule, m, predicted, run)


def gpipe_run() -> tuple[list, RunSummary]:
    """A GPipe m=4 run on cpu:2 as the store gives it: 4 steps of timeline rows, equal devices, and its summary."""
    rows = []
    for step in range(4):
        for device in ("cpu:0", "cpu:1"):
            rows += [(step, device, "forward", 0.0, 0.004), (step, device, "backward", 0.01, 0.018),
                     (step, device, "optimizer", 0.02, 0.021)]
    return rows, RunSummary(strategy="pipeline", devices=["cpu:0", "cpu:1"], split=[4], micro_batches=4,
                            schedule="gpipe", batch_size=64, step_time_s=MeanStd(0.020))


def test_a_split_backwards_measured_cost_slows_only_the_schedules_that_split():
    """The probe's extra per micro-batch (RunSummary.split_backward_extra_s) lengthens every I and W action but
    stage 0's: ZB-V and DualPipeV predict slower, GPipe and 1F1B exactly as before; a run that split its
    backward has it taken out of the backward it timed, so GPipe predicted from it is what a GPipe run gives."""
    rows, summary = gpipe_run()
    plain = {(p.schedule, p.micro_batches): p.step_time_s for p in predict(summary, rows, warmup=1)}
    extra = 0.0005
    probed = summary.replace(split_backward_extra_s=[extra, extra])
    slower = {(p.schedule, p.micro_batches): p.step_time_s for p in predict(probed, rows, warmup=1)}
    for key, step in plain.items():
        if SCHEDULE_INFO[key[0]].splits_backward:
            assert slower[key] > step, key
        else:
            assert slower[key] == pytest.approx(step), key
    assert predict(summary.replace(split_backward_extra_s=[-0.001, None]), rows, warmup=1) \
        == predict(summary, rows, warmup=1)   # a probe's noise below zero, or none, costs nothing
    # ZB-V on 2 devices: each device's I and W, m of each, on its two stages but stage 0; the critical path
    # carries at least device 1's: 4 micro-batches x its 2 stages x (2 halves of extra / 2) / 2 stages
    assert slower[("zbv", 4)] - plain[("zbv", 4)] >= 4 * extra - 1e-9
    # At another micro-batch count: all of it per call (an older run's, or as the probe found it) costs as much a
    # micro-batch; all of it per sample, less where micro-batches are smaller (m=8) and more where larger (m=2).
    per_sample = {(p.schedule, p.micro_batches): p.step_time_s
                  for p in predict(probed.replace(split_backward_fixed_s=[0.0, 0.0]), rows, warmup=1)}
    assert per_sample[("zbv", 4)] == pytest.approx(slower[("zbv", 4)])
    assert per_sample[("zbv", 8)] < slower[("zbv", 8)] and per_sample[("zbv", 2)] > slower[("zbv", 2)]

    # The same device times, as a ZB-V run would time them: its I and W halves carry the extra (device 0's
    # stage 0 excepted: half its stages), its fitted step the ZB-V prediction above.
    zbv_rows = []
    for step in range(4):
        for device, incurred in (("cpu:0", extra / 2), ("cpu:1", extra)):
            half = 0.004 + 4 * incurred / 2   # per step: 4 micro-batches' halves
            zbv_rows += [(step, device, "forward", 0.0, 0.004), (step, device, "backward-input", 0.01, 0.01 + half),
                         (step, device, "backward-weight", 0.015, 0.015 + half),
                         (step, device, "optimizer", 0.02, 0.021)]
    zbv_run = probed.replace(schedule="zbv", split=[2, 4, 6], step_time_s=MeanStd(slower[("zbv", 4)]))
    from_zbv = {(p.schedule, p.micro_batches): p.step_time_s for p in predict(zbv_run, zbv_rows, warmup=1)}
    assert from_zbv[("gpipe", 4)] == pytest.approx(plain[("gpipe", 4)], rel=0.02)


def test_a_two_way_exchanges_cost_delays_only_dualpipevs_pair_hand_overs_sent_back_before_taken():
    """RunSummary.two_way_extra_s: a pair's hand-over whose receiver's own pair sends back first arrives that
    much after the receiver's pair ends. Only DualPipeV overlaps pairs: it predicts slower, every other schedule
    exactly as before."""
    from engine.strategies.pipeline.schedule_actions import Action
    # Stages 0 and 3 on device 0, 1 and 2 on device 1 (a V). Device 0's pair ends at 3 and sends F0.1 (and F0.2);
    # device 1's pair ends at 3.5 and sends F2.0 back before it takes F0.1: F0.1 arrives at 3.5 + 0.5. F2.0 is
    # not late: device 0's pair sent before it left.
    lists = [[Action("F", 0, 0), Action("F", 0, 1, held=True), Action("F", 0, 2), Action("F", 3, 0)],
             [Action("F", 1, 0, held=True), Action("F", 2, 0), Action("F", 1, 1)]]

    def duration(action):
        return 1.5 if action.stage == 2 else 1.0
    _, plain = simulate(lists, duration)
    _, late = simulate(lists, duration, two_way_extra_s=0.5)
    assert (plain[Action("F", 1, 1)], late[Action("F", 1, 1)]) == (3.5, 4.0)
    assert plain[Action("F", 3, 0)] == late[Action("F", 3, 0)] == 3.5
    for name in ("dualpipev", "zbv", "interleaved1f1b"):
        plan = actions(SCHEDULE_INFO[name], 2, 2, 8)
        step = simulate(plan, lambda action: 1.0)[0]
        if name == "dualpipev":
            assert simulate(plan, lambda action: 1.0, two_way_extra_s=0.5)[0] > step
        else:
            assert simulate(plan, lambda action: 1.0, two_way_extra_s=0.5)[0] == step

    rows, summary = gpipe_run()
    plain = {(p.schedule, p.micro_batches): p.step_time_s for p in predict(summary, rows, warmup=1)}
    measured = {(p.schedule, p.micro_batches): p.step_time_s
                for p in predict(summary.replace(two_way_extra_s=0.002), rows, warmup=1)}
    for key, step in plain.items():
        if key[0] == "dualpipev":
            assert measured[key] >= step, key
        else:
            assert measured[key] == pytest.approx(step), key
    assert any(measured[key] > step for key, step in plain.items() if key[0] == "dualpipev")
