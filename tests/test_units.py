"""Pure-Python pieces: config, protocol, planning, step merging, the store."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from engine.config import ConfigError, ExperimentConfig
from engine.devices import Device
from engine.planner.planning import balanced_split
from engine.record.step_merger import StepMerger
from engine.record.summary import stage_balance, stage_busy, theoretical_bubble, why_no_theory
from engine.results import ExperimentResult, RunSummary, Step, from_json
from engine.rules import effective_micro_batches, problems
from engine.store import Store
from engine.strategies import STRATEGIES
from engine.wire import worker as protocol
from engine.wire.rank import StepReport

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def test_config_round_trips_through_json():
    config = ExperimentConfig(strategy="pipeline", split=(3, 6), micro_batches=4, devices="cpu:3")
    again = ExperimentConfig.from_json(config.to_json())
    assert again == config
    assert json.loads(config.to_json())["split"] == [3, 6]


def test_config_from_dict_reports_every_bad_key_at_once():
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.from_dict({"steps": "ten", "colour": "red", "split": "x"})
    options = {p.option for p in info.value.problems}
    assert options == {"steps", "colour", "split"}


def test_config_problems_name_the_option():
    found = problems(ExperimentConfig(strategy="single", micro_batches=4, split=(2,)))
    assert {p.option for p in found} == {"micro_batches", "split"}
    assert str(found[0]).startswith("--")


def test_declared_choices_and_bounds_are_checked_once_each_and_say_what_is_allowed():
    """engine/rules.py checks every option's declared choices and bounds (engine/config.py) in one pass: a value
    outside them is named with what is allowed, once, and not where another problem names the option already."""
    def said(**options) -> list[str]:
        return [str(p) for p in problems(ExperimentConfig(**options))]
    assert said(strategy="zero3") == ["--strategy: unknown value 'zero3'; allowed: " + ", ".join(STRATEGIES)]
    assert said(split_level=7)[0].startswith("--split-level: unknown value 7; allowed: 1: ")   # with their meaning
    assert said(width=0) == ["--width: must be from 1 to 16384, got 0"]
    assert said(profile_steps=30) == ["--profile-steps: must be from 0 to 20 (a profiled step's trace is large), "
                                      "got 30"]
    # an option that does not apply is said so, once, whatever its value
    for options in (dict(script_launch="bogus"), dict(samples_per_step=0), dict(loader_workers=99)):
        (only,) = said(**options)
        assert "applies only" in only, only
    # a watched script's steps of 0 mean "until it ends": no bound refuses them
    assert not [p for p in problems(ExperimentConfig(strategy="script", script=__file__, steps=0))
                if p.option == "steps"]


def test_split_size_gives_micro_batches():
    config = ExperimentConfig(strategy="pipeline", batch_size=120, split_size=20)
    assert effective_micro_batches(config) == 6


def test_protocol_round_trip_and_garbled_lines():
    from engine.events import Finished, Started, Warned
    from engine.results import RunSummary, Step
    line = protocol.encode(Step(step=3, t=1.5, loss=float("nan"), intervals={"cpu:0": [["forward", 1.0, 1.2]]}))
    event = protocol.decode(line)
    assert event == Step(step=3, t=1.5, loss=None, intervals={"cpu:0": [["forward", 1.0, 1.2]]})
    # Nested types come back as types: the started event's devices, the finished event's summary.
    started = Started(t=0.5, devices=[Device("cpu:0", "cpu", 0, core=0)], split=[2], notes=["a note"])
    assert protocol.decode(protocol.encode(started)) == started
    finished = Finished(t=2.0, status="finished", summary=RunSummary(strategy="single", steps=4))
    assert protocol.decode(protocol.encode(finished)) == finished
    assert protocol.decode('{"v": 1, "type": "telepathy", "t": 0}') is None     # a newer type: ignored
    truncated = line[: len(line) // 2]
    events = list(protocol.read_events([line, "{not json", '{"v": 99, "type": "x", "t": 0}', "", b"\xff\xfe",
                                        '{"v": 1, "type": "step", "t": 0}', '{"v": 1, "type": "new", "t": 0}',
                                        truncated, line]))
    assert [type(e) for e in events] == [Step, Warned, Warned, Warned, Warned, Warned, Step]
    assert "a step event without the fields it needs" in events[4].message
    assert "garbled" in events[-2].message


@pytest.mark.parametrize("costs,stages,expected", [
    ([1] * 8 + [0.1], 2, (4,)),
    ([1, 1, 1, 1, 4, 4], 2, (4,)),       # heavier later blocks pull the split late
    ([4, 4, 1, 1, 1, 1, 1], 2, (2,)),
    ([1, 2, 3, 4, 5, 6], 3, (3, 5)),
])
def test_balanced_split_minimizes_the_slowest_stage(costs, stages, expected):
    assert balanced_split(costs, stages) == expected


def test_theoretical_bubble_only_where_its_formula_holds():
    cpu2 = ["cpu:0", "cpu:1"]
    assert theoretical_bubble("pipeline", cpu2, 4, own_processes=True) == pytest.approx(0.2)
    assert theoretical_bubble("pipeline", ["cpu:0", "cpu:1", "cpu:2"], 4, own_processes=True) == pytest.approx(1 / 3)
    assert theoretical_bubble("model-parallel", cpu2, 1, own_processes=True) == pytest.approx(0.5)
    assert theoretical_bubble("ddp", cpu2, 1, own_processes=True) is None
    # two stages taking turns on one GPU: no device idles the way the formula counts
    assert theoretical_bubble("model-parallel", ["cuda:0", "cuda:0"], 1, own_processes=False) is None
    assert theoretical_bubble("pipeline", ["cuda:0", "cuda:0"], 4, own_processes=False) is None
    assert "share cuda:0" in why_no_theory("pipeline", ["cuda:0", "cuda:0"], 4, own_processes=False)
    # a CPU and a GPU stage driven from one process: the naive split holds, micro-batches do not overlap so
    assert theoretical_bubble("model-parallel", ["cpu:0", "cuda:0"], 1, own_processes=False) == pytest.approx(0.5)
    assert theoretical_bubble("pipeline", ["cpu:0", "cuda:0"], 4, own_processes=False) is None
    assert "one process" in why_no_theory("pipeline", ["cpu:0", "cuda:0"], 4, own_processes=False)
    assert why_no_theory("pipeline", cpu2, 4, own_processes=True) is None


def test_stage_balance_is_the_least_over_the_most_busy_stage():
    assert stage_balance("pipeline", ["cpu:0", "cpu:1"], [0.3, 0.6]) == pytest.approx(0.5)
    assert stage_balance("model-parallel", ["cpu:0", "cpu:1", "cpu:2"], [0.2, 0.4, 0.1]) == pytest.approx(0.25)
    assert stage_balance("ddp", ["cpu:0", "cpu:1"], [0.3, 0.6]) is None          # no stages
    assert stage_balance("pipeline", ["cuda:0", "cuda:0"], [0.5, 0.5]) is None   # one device: no balance to read
    assert stage_balance("pipeline", ["cuda:0", "cuda:0", "cuda:1"], [0.5, 0.5, 0.2]) is None
    assert stage_balance("pipeline", ["cpu:0", "cpu:1"], [0.0, 0.0]) is None


def test_stage_busy_leaves_out_drawing_the_batch():
    """Every stage draws the whole batch: counting it would pull an uneven split's balance towards 1."""
    from engine.record.totals import RunTotals
    merger, totals = StepMerger(2, ["cpu:0", "cpu:1"], origin=0.0), RunTotals(["cpu:0", "cpu:1"], warmup=0)
    for step in range(2):
        t = step * 1.0
        merger.add(0, StepReport(step, t, t + 1.0, samples=8,
                                 intervals={"cpu:0": [["data", t, t + 0.1], ["forward", t + 0.1, t + 0.3]]}))
        totals.add(merger.add(1, StepReport(step, t, t + 1.0, samples=0, intervals={
            "cpu:1": [["data", t, t + 0.1], ["wait", t + 0.1, t + 0.3], ["forward", t + 0.3, t + 0.7]]})))
    assert stage_busy("pipeline", ["cpu:0", "cpu:1"], totals) == pytest.approx([0.2, 0.4])
    assert totals.busy_shares() == pytest.approx([0.3, 0.5])  # with the data spans
    assert stage_busy("ddp", ["cpu:0", "cpu:1"], totals) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0.001, 2.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 5.0)),
                min_size=1, max_size=40), st.integers(0, 5))
def test_running_totals_give_the_summary_of_all_steps(rows, warmup):
    """Welford's running mean and variance, and busy-time sums, against the figures of the whole list."""
    import statistics

    from engine.record.totals import RunTotals
    totals = RunTotals(["a", "b"], warmup)
    steps = [Step(step=i, time_s=t, throughput=64 / t, busy={"a": a, "b": b}, loss=loss, batch_split=[i % 2, 1])
             for i, (t, a, b, loss) in enumerate(rows)]
    for step in steps:
        totals.add(step)
    measured = steps[warmup:]
    assert totals.steps == len(steps) and totals.measured == len(measured)
    assert (totals.first_loss, totals.last_loss) == (steps[0].loss, steps[-1].loss)
    assert sum(e.steps for e in totals.batch_split_counts()) == len(steps)
    if not measured:
        assert totals.step_time.summary() is None and totals.busy_shares() is None
        return
    times = [s.time_s for s in measured]
    summary = totals.step_time.summary()
    assert summary.mean == pytest.approx(statistics.fmean(times))
    assert summary.std == pytest.approx(statistics.stdev(times) if len(times) > 1 else 0.0, abs=1e-9)
    assert totals.throughput.summary().mean == pytest.approx(statistics.fmean(s.throughput for s in measured))
    for i, d in enumerate("ab"):
        expected = sum(s.busy[d] * s.time_s for s in measured) / sum(times)
        assert totals.busy_shares()[i] == pytest.approx(min(1.0, expected))


def test_step_merger_tiles_steps_across_ranks():
    merger = StepMerger(2, ["cpu:0", "cpu:1"], origin=100.0)
    r0 = StepReport(0, 100.0, 101.0, {"cpu:0": [["forward", 100.0, 100.5]]}, loss_part=None, samples=8)
    r1 = StepReport(0, 100.1, 100.9, {"cpu:1": [["forward", 100.5, 100.75], ["wait", 100.1, 100.5]]},
                    loss_part=2.0, samples=0)
    assert merger.add(0, r0) is None
    merged = merger.add(1, r1)
    assert merged.time_s == pytest.approx(1.0)
    assert merged.busy == {"cpu:0": pytest.approx(0.5), "cpu:1": pytest.approx(0.25)}
    assert merged.loss == 2.0 and merged.samples == 8
    assert merged.intervals["cpu:1"][0] == ["wait", pytest.approx(0.1), pytest.approx(0.5)]


def test_store_marks_runs_of_dead_processes_interrupted(tmp_path):
    db = tmp_path / "s.sqlite3"
    # A child process creates a run and dies without finishing it.
    code = (f"import sys; sys.path.insert(0, {os.getcwd()!r}); from engine.store import Store; "
            f"s = Store({str(db)!r}); print(s.create_run({{'strategy': 'single'}}))")
    run_id = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    with Store(db) as store:
        run = store.get_run(run_id)
        assert run.status == "interrupted"
        assert store.integrity_ok()


def test_store_keeps_steps_timeline_and_samples(tmp_path):
    with Store(tmp_path / "s.sqlite3") as store:
        run_id = store.create_run({"strategy": "single"})
        store.add_steps(run_id, [Step(step=0, t=1.0, time_s=0.5, samples=4, throughput=8.0, loss=1.0,
                                      batch_split=[2, 2], intervals={"cpu:0": [["forward", 0.5, 0.7]]})])
        store.add_samples(run_id, [{"t": 0.6, "device": "cpu:0", "util": 50.0}])
        store.finish_run(run_id, "finished", RunSummary(strategy="single", steps=1))
        assert store.steps(run_id)[0].batch_split == [2, 2]
        assert store.timeline(run_id) == [(0, "cpu:0", "forward", 0.5, 0.7)]
        assert store.samples(run_id)[0].util == 50.0
        assert store.get_run(run_id).summary == RunSummary(strategy="single", steps=1)
        with pytest.raises(ValueError):
            store.finish_run(run_id, "exploded")


def test_experiment_table_shows_each_point_with_its_stage_balance():
    from engine.cli.report import experiment_table

    def point(label, ms, balance, mfu=None):
        return {"label": label, "step_time_s": {"mean": ms / 1000, "std": 0.001},
                "throughput": {"mean": 1000.0, "std": 5.0}, "bubble": {"measured": 0.3}, "stage_balance": balance,
                "run_ids": ["a"], "mfu": mfu}
    table = experiment_table(from_json(ExperimentResult, {
        "experiment_id": "exp-1", "name": "split-point", "status": "finished", "best": "split 2",
        "automatic_split": [2], "points": [point("split 1", 80, 0.31, 0.25), point("split 2", 60, 0.9, 0.4),
                                           {"label": "split 3", "error": "rank 1 failed"}]})).splitlines()
    assert table[1].split()[-4:] == ["balance", "MFU", "smp/J", "runs"]
    assert table[3].split()[-6:] == ["0.90", "40.0%", "-", "1", "<-", "best"]
    assert table[2].split()[-4:] == ["0.31", "25.0%", "-", "1"]
    assert table[4].endswith("failed: rank 1 failed")
    assert table[5] == "by MFU: split 2 > split 1"   # the ranking by MFU (no point has samples per joule)
    assert table[6] == "automatic balanced split: [2]"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 0.5), st.floats(0, 100)), min_size=1, max_size=60),
       st.floats(0.05, 2.0))
def test_the_one_second_mean_is_the_same_figure_for_lists_and_arrays(steps, window):
    """The app draws the NumPy path, the exports the plain one: one definition, two speeds."""
    import numpy as np

    from engine.telemetry.smooth import trailing_mean
    t = np.cumsum([dt for dt, _ in steps])
    y = np.array([v for _, v in steps])
    plain = trailing_mean(t.tolist(), y.tolist(), window)
    assert np.allclose(trailing_mean(t, y, window), plain, atol=1e-9)
    assert plain[0] == y[0]
    for i in range(len(t)):  # the mean of the samples up to this one in (t - window, t]
        inside = y[:i + 1][t[:i + 1] > t[i] - window]
        assert plain[i] == pytest.approx(inside.mean())


def test_a_collective_is_waiting_until_the_last_rank_arrives_and_never_over_the_ranks_own_work():
    from engine.record.step_merger import separate_collective_waits
    # Rank 1 launches both buckets early, the first while its backward still runs (2 .. 5);
    # rank 0 arrives at 6 and at 9.
    rank0 = StepReport(0, 0, 10, {"cpu:0": [["backward", 0, 9], ["communication", 6, 7], ["communication", 9, 10]]})
    rank1 = StepReport(0, 0, 10, {"cpu:1": [["backward", 0, 5], ["communication", 3, 7], ["communication", 5, 10]]})
    separate_collective_waits([rank0, rank1])
    spans1 = rank1.intervals["cpu:1"]
    assert sorted(s for s in spans1 if s[0] == "communication") == [["communication", 6, 7],
                                                                    ["communication", 9, 10]]
    # Waiting from the end of its own backward to each arrival of rank 0, around the first all-reduce
    # itself, and once where the two buckets' waits overlapped.
    assert sorted(s for s in spans1 if s[0] == "wait") == [["wait", 5, 6], ["wait", 7, 9]]
    assert not [s for s in rank0.intervals["cpu:0"] if s[0] == "wait"]  # the last to arrive never waits
    # Ranks that do not run the same collectives are left as timed.
    odd = StepReport(0, 0, 2, {"cpu:1": [["communication", 1, 2]]})
    separate_collective_waits([StepReport(0, 0, 2, {"cpu:0": []}), odd])
    assert odd.intervals["cpu:1"] == [["communication", 1, 2]]


def test_rank_events_read_back_what_a_rank_wrote():
    """engine/wire/rank.py: each event through its JSON line and back; the channel's ``time`` and a newer
    rank's fields ignored, an unknown type None, a known one missing its fields an error the worker reports."""
    from engine.wire import rank as ev
    events = [ev.Ready(123, [4], True, [["0F0"]]), ev.StepReport(2, 1.0, 2.0, {"cpu:0": [["forward", 1.0, 1.5]]},
                                                                0.5, 8, [4, 4], {"cpu:0": {"params": 10}}),
              ev.Profiled("/tmp/trace.json", 3.0), ev.Done(1.0, 0.1, 0.002), ev.Failed("boom", "Traceback...")]
    for event in events:
        line = json.dumps({**ev.encode(event), "time": 9.0, "from_a_newer_rank": 1})
        assert ev.decode(json.loads(line)) == event
    assert ev.decode({"type": "telepathy"}) is None
    with pytest.raises(ev.codec.WireError, match="rank_step message without start"):
        ev.decode({"type": "rank_step", "step": 1})


def test_fork_server_messages_read_back_and_garbled_ones_are_named():
    """engine/wire/forkserver.py: each message through its JSON object and back; a known op with a field
    missing or mistyped is garbled, naming the op and the request's id (a spawn is refused under it); an op
    no end knows is None."""
    from engine.wire import forkserver as m
    for message in (m.Spawn(3, "engine.run.rank", {"A": "1"}, "/tmp", [0, 1, 2], ["x"], "(rank 0)"),
                    m.Spawned(3, 1234), m.Refused(None, "why"), m.Exited(1234, -9), m.Signal(1234, 15), m.Ping(),
                    m.Pong(), m.Client()):
        assert m.decode(json.loads(json.dumps(m.encode(message)))) == message
    assert m.decode({"op": "spawn", "id": 0, "module": "x", "env": {}, "cwd": "/", "fds": [0, 1, 2]}).argv == []
    for garbled, field in (({"op": "spawn", "id": 7, "module": "x", "env": {"A": 1}, "cwd": "/", "fds": [0, 1, 2]},
                            "env"),
                           ({"op": "spawn", "id": 7, "env": {}, "cwd": "/", "fds": [0, 1, 2]}, "module"),
                           ({"op": "signal", "pid": 1, "signal": True}, "signal")):
        with pytest.raises(m.MessageError, match=field) as caught:
            m.decode(garbled)
        assert caught.value.tag == garbled["op"] and caught.value.ident == garbled.get("id")
    assert m.decode({"op": "telepathy"}) is None and m.decode({"op": []}) is None and m.decode({"op": {}}) is None
    with pytest.raises(m.MessageError) as caught:
        m.decode({"op": "spawn", "id": True, "module": "x", "env": {"SECRET": 1}, "cwd": "/", "fds": [0, 1, 2]})
    assert caught.value.ident is None and "SECRET" not in str(caught.value)   # the field's type, not its value


def test_the_diagnosis_names_the_device_that_idles_or_waits_on_its_input_most():
    from engine.record.findings import findings
    from engine.record.time_by_kind import table
    from engine.results import DeviceKinds, RunSummary
    fed = DeviceKinds("cpu:0", 0.1, {"forward": 0.05, "backward": 0.045}, 0.005)
    starved = DeviceKinds("cpu:1", 0.1, {"data": 0.07, "forward": 0.03}, 0.0)
    fed_late = DeviceKinds("cpu:1", 0.1, {"data-wait": 0.07, "forward": 0.03}, 0.07)   # by its loader's workers
    waiting = DeviceKinds("cpu:1", 0.1, {"forward": 0.03, "wait": 0.06}, 0.06)

    def diagnosis(kinds):   # an engine run's: its first finding
        found = findings(RunSummary(devices=[d.device for d in kinds], steps=1, time_by_kind=kinds), script=False,
                         world=len(kinds))
        return found[0].text if found else None
    # ... with what takes the loading off the rank, or shortens the wait
    assert diagnosis([fed, starved]) == "cpu:1 spends 70 % of each step loading its data in its own process (busy " \
        "on it, not waiting): loader workers on cores of their own would load it beside the step (--input-prep " \
        "loader --loader-workers, --loader-cores), or a cheaper decode"
    assert diagnosis([fed, fed_late]) == "cpu:1 waits on data (its loader's worker processes) 70 % of each step, " \
        "idle meanwhile: more loader workers on cores of their own (--loader-workers, --loader-cores), pinned " \
        "memory on GPUs (--pin-memory), or a cheaper decode"
    assert diagnosis([fed, waiting]).startswith("cpu:1 idles 60 % of each step (waiting on a peer")
    assert diagnosis([fed]) == "every device busy at least 95 % of each step" and diagnosis([]) is None
    assert table([fed, starved])[0].split() == ["device", "step", "ms", "data", "forward", "backward", "idle"]
