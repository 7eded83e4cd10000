"""torch.profiler over the steps a user asks for: `watch --profile-steps A:B` on every rank of a watched script,
and `run --profile-from`: each rank's trace kept with the run, its steps marked (engine/measure/profiling.py)."""
from __future__ import annotations

import pytest

from engine.measure.counted_step import counted_step, counted_step_note
from engine.measure.profiling import STEP_MARK
from engine.store import Store
from helpers import cli


def marked_steps(trace: dict) -> list[str]:
    return sorted({e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith(STEP_MARK)})


def test_watch_records_the_steps_asked_for_on_every_rank(tmp_path):
    db = str(tmp_path / "runs.sqlite3")
    _, summary = cli("watch", "--devices", "cpu:2", "--profile-steps", "1:2", "--db", db, "--json", "--",
                     "examples/ddp_train.py", "--steps", "5", "--batch-size", "16", check_json=True)
    with Store(db) as store:
        profiles = store.profiles(summary["run_id"])
    assert [(rank, device) for rank, device, _, _ in profiles] == [(0, "cpu:0"), (1, "cpu:1")]
    for _, _, _, trace in profiles:
        assert marked_steps(trace) == [f"{STEP_MARK}1", f"{STEP_MARK}2"]
        # the script's own ops, its DDP all-reduce among them
        names = {str(e.get("name")) for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
        assert "aten::addmm" in names and any("allreduce" in name for name in names), sorted(names)[:40]
        # the FLOP counter's dispatch mode is in no profiled step: it counted the step after them
        assert not any("DispatchMode" in name for name in names)
    assert any(note.startswith("step 3's FLOPs were counted") for note in summary["notes"]), summary["notes"]
    # and read back by the trace reader: every rank's, a CPU's ops only (no GPU kernels), said so
    _, job = cli("trace", "--run", summary["run_id"], "--db", db, "--json", check_json=True)
    assert [r["rank"] for r in job["ranks"]] == [0, 1]
    assert all(r["cpu_ops"] > 0 and r["gpu_events_read"] == 0 for r in job["ranks"]), job["ranks"]


@pytest.mark.quick
@pytest.mark.parametrize("steps,profiled,counted", [(10, range(0), 1), (10, range(1, 3), 3), (10, range(2, 4), 1),
                                                    (3, range(1, 3), 1), (0, range(0, 5), 5)])
def test_the_flops_are_counted_on_a_step_the_profiler_does_not_record(steps, profiled, counted):
    """The counter's dispatch would be in a profiled step's trace: the step after them is counted where there is
    one (``steps`` 0: a watched script's, open-ended); where there is none, the note says the trace holds it."""
    assert counted_step(steps, profiled) == counted
    note = counted_step_note(steps, 5, profiled) or ""
    assert ("its trace holds the counter's dispatch" in note) == (counted in profiled)


def test_run_profiles_from_the_step_given(tmp_path):
    db = str(tmp_path / "runs.sqlite3")
    _, summary = cli("run", "--devices", "cpu:1", "--width", "32", "--depth", "2", "--batch-size", "16", "--steps",
                     "5", "--warmup", "1", "--profile-steps", "1", "--profile-from", "3", "--db", db, "--json",
                     check_json=True)
    with Store(db) as store:
        ((_, _, _, trace),) = store.profiles(summary["run_id"])
    assert marked_steps(trace) == [f"{STEP_MARK}3"]


@pytest.mark.quick
@pytest.mark.parametrize("given,said", [("2:1", "A at most B"), ("x", "N (the first N measured steps)"),
                                        ("1:", "A:B")])
def test_a_profile_range_that_is_none_is_refused(given, said):
    proc = cli("watch", "--profile-steps", given, "--", "examples/ddp_train.py")
    assert proc.returncode == 2 and "--profile-steps" in proc.stderr and said in proc.stderr, proc.stderr


@pytest.mark.quick
def test_profile_from_without_profile_steps_is_refused():
    proc = cli("run", "--profile-from", "2", "--steps", "4")
    assert proc.returncode == 2 and "--profile-from: applies with --profile-steps" in proc.stderr, proc.stderr


@pytest.mark.quick
def test_trace_of_a_run_that_stored_none_says_so(tmp_path):
    db = str(tmp_path / "runs.sqlite3")
    proc = cli("trace", "--run", "nosuchrun", "--db", db)
    assert proc.returncode == 2 and "no run 'nosuchrun'" in proc.stderr, proc.stderr
    proc = cli("trace", "--db", db)
    assert proc.returncode == 2 and "or --run RUN_ID" in proc.stderr, proc.stderr
