"""A job's profiler traces as a run of kind trace (engine/traces/lanes.py, as_run.py; `main.py trace --store`): the
lanes of the real two-rank fixture (kernels by kind, the GPU's idle gaps by cause, bounded), the run the store keeps
of it, and that run exported as any run (CSV, HTML)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.export import export
from engine.figures import palette
from engine.figures.timeline import KIND_HEIGHT
from engine.store import Store
from engine.traces import lanes as lanes_mod
from engine.traces.as_run import TRACE, store_trace_run, trace_run
from engine.traces.job import read_job_and_lanes
from engine.traces.kernels import COMMUNICATION, COMPUTATION, covered, merged
from engine.traces.lanes import BUSY_LANE_KINDS, IDLE_LANE_KINDS, LANE_KINDS
from engine.traces.timeline import KINDS, Timeline
from helpers import cli

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

FOLDER = Path(__file__).resolve().parent / "data" / "traces" / "hta_trace_filter"
ITERATION = 551    # the fixture's one iteration kept (#552 is left out, as HTA's default does)


@pytest.fixture(scope="module")
def reading():
    told = []
    job, lanes = read_job_and_lanes([FOLDER], progress=lambda done, total, path: told.append((done, total, path)))
    return job, lanes, told


def test_each_file_read_is_told(reading):
    _, _, told = reading
    assert [(done, total) for done, total, _ in told] == [(1, 2), (2, 2)]
    assert {path.name for _, _, path in told} == {"sampled_rank-0.json.gz", "sampled_rank-1.json.gz"}


def test_lanes_hold_the_kernels_by_kind_and_the_idle_gaps_by_cause(reading):
    job, lanes, _ = reading
    assert [rank.rank for rank in lanes] == [0, 1]
    for rank, figures in zip(lanes, job.ranks, strict=True):
        kinds = {kind for _, kind, _, _ in rank.intervals}
        assert kinds <= set(LANE_KINDS)
        assert {"compute", "communication", "host-wait"} <= kinds   # the fixture's ranks idle mostly on the host
        assert {iteration for iteration, _, _, _ in rank.intervals} == {ITERATION}
        assert rank.resolution_us == 0.0   # under the bound: every kernel as recorded
        start, end = rank.bounds[ITERATION]
        busy = merged((t0, t1) for _, kind, t0, t1 in rank.intervals if kind in BUSY_LANE_KINDS.values())
        idle = sum(t1 - t0 for _, kind, t0, t1 in rank.intervals if kind in IDLE_LANE_KINDS.values())
        # the busy intervals and the gaps between them make the iteration's span, each moment once
        assert covered(busy) + idle == pytest.approx(end - start, abs=1e-3)
        assert busy[0][0] == start and busy[-1][1] == end
        # the busy columns over the whole kept span: their mean is the rank's busy share (HTA's 1 - idle)
        shares = [share for _, share in rank.busy]
        assert len(shares) == lanes_mod.BUSY_COLUMNS
        assert sum(shares) / len(shares) == pytest.approx(1 - figures.idle_pct / 100, abs=1e-6)


def test_each_idle_gap_takes_the_cause_of_the_kernel_that_ends_it():
    timeline = Timeline()
    compute, communication = KINDS.index(COMPUTATION), KINDS.index(COMMUNICATION)
    #            start, end, kind,          launch
    for kernel in ((0, 10, compute, -5),     # the first: no gap before it
                   (15, 20, compute, 12),    # launched after the GPU went idle at 10: the host was late
                   (25, 30, compute, 8),     # launched in time, a 5 µs gap: launch overhead
                   (100, 110, compute, 9),   # launched in time, a 70 µs gap: something else
                   (105, 120, communication, 9)):
        start, end, kind, launch = kernel
        for column, value in (("ts", start), ("end", end), ("stream", 7), ("launch", launch), ("iteration", 3),
                              ("source", len(timeline))):
            getattr(timeline, column).append(value)
        timeline.kind.append(kind)
        timeline.kernel_category.append(1)
    rows = lanes_mod.lane_intervals(timeline, list(range(len(timeline))), delay=30)
    assert rows == [(3, "compute", 0, 10), (3, "host-wait", 10, 15), (3, "compute", 15, 20),
                    (3, "kernel-wait", 20, 25), (3, "compute", 25, 30), (3, "other-idle", 30, 100),
                    (3, "compute", 100, 110), (3, "communication", 105, 120)]
    joined = lanes_mod.lane_intervals(timeline, list(range(len(timeline))), delay=30, resolution=5)
    assert joined == [(3, "compute", 0, 30), (3, "other-idle", 30, 100), (3, "compute", 100, 110),
                      (3, "communication", 105, 120)]


def test_every_lane_kind_has_its_colour_and_the_gaps_are_thin():
    assert all(kind in palette.KIND_COLORS for kind in LANE_KINDS)
    assert all(KIND_HEIGHT.get(kind, 1.0) < 0.5 for kind in IDLE_LANE_KINDS.values())


def test_a_rank_of_many_kernels_keeps_its_lanes_bounded(monkeypatch):
    monkeypatch.setattr(lanes_mod, "MOST_INTERVALS", 100)
    _, lanes = read_job_and_lanes([FOLDER])
    for rank in lanes:
        assert 0 < len(rank.intervals) <= 100
        assert rank.resolution_us > 0
        gaps = [t1 - t0 for _, kind, t0, t1 in rank.intervals if kind in IDLE_LANE_KINDS.values()]
        assert min(gaps) > rank.resolution_us   # the shorter ones joined into the intervals beside them


def test_the_run_holds_each_rank_as_a_device(reading):
    job, lanes, _ = reading
    run = trace_run(job, lanes, [FOLDER])
    s = run.summary
    assert s.strategy == TRACE and run.config["strategy"] == TRACE
    assert s.devices == ["rank 0", "rank 1"] and s.model == "traces: hta_trace_filter"
    assert s.traces.paths == [str(FOLDER)] and s.traces.ranks == [0, 1] and s.traces.world_size == 128
    assert s.devices_busy == pytest.approx([1 - r.idle_pct / 100 for r in job.ranks])
    assert s.findings == job.findings and s.findings
    assert s.notes[0].startswith("read from profiler traces: ") and any("126 are not" in n for n in s.notes)
    (step,) = run.steps
    assert step.step == ITERATION and step.time_s == pytest.approx(job.iterations[0].span_us / 1e6)
    assert set(step.intervals) == {"rank 0", "rank 1"}
    assert min(t0 for rows in step.intervals.values() for _, t0, _ in rows) == 0.0   # the job's first kernel
    assert step.t == pytest.approx(max(t1 for rows in step.intervals.values() for _, _, t1 in rows))
    for kinds in s.time_by_kind:   # each moment once: the kinds and idle make the rank's iteration
        assert sum(kinds.by_kind.values()) + kinds.idle_s == pytest.approx(kinds.step_s, rel=1e-3)
        assert kinds.by_kind["compute"] > 0 and kinds.by_kind["communication"] > 0
    assert {sample["device"] for sample in run.samples} == {"rank 0", "rank 1"}
    assert all(0 <= sample["util"] <= 100 for sample in run.samples)


def test_the_stored_run_exports_as_any_run(reading, tmp_path):
    job, lanes, _ = reading
    with Store(tmp_path / "runs.sqlite3") as store:
        run_id = store_trace_run(store, trace_run(job, lanes, [FOLDER]))
        record = store.get_run(run_id)
        assert record.status == "finished" and record.config.strategy == TRACE
        assert dataclasses.asdict(record.summary.traces)["paths"] == [str(FOLDER)]   # read back typed
        assert store.timeline_steps(run_id) == [ITERATION]
        csv_paths = export(store, run_id, "csv", tmp_path / "csv")
        (html,) = export(store, run_id, "html", tmp_path / "report.html")
    timeline = next(p for p in csv_paths if p.name.endswith("-timeline.csv")).read_text().splitlines()
    assert timeline[0].startswith("step,device,kind,t0 (ms),t1 (ms)")
    rows = [line.split(",") for line in timeline[1:]]
    assert {row[1] for row in rows} == {"rank 0", "rank 1"} and {row[2] for row in rows} <= set(LANE_KINDS)
    busy = next(p for p in csv_paths if p.name.endswith("-busy.csv")).read_text()
    assert "rank 0" in busy and "rank 1" in busy
    page = html.read_text()
    assert str(FOLDER) in page and "rank 1" in page and "traces: hta_trace_filter" in page


def test_trace_store_on_the_command_line(tmp_path):
    db = str(tmp_path / "runs.sqlite3")
    proc, out = cli("trace", str(FOLDER), "--store", "--json", "--progress", "--db", db, check_json=True)
    assert out["run_id"] and [r["rank"] for r in out["ranks"]] == [0, 1]
    assert proc.stderr.count("progress: ") == 2
    listed = cli("runs", "--db", db).stdout
    assert out["run_id"] in listed and "traces: hta_trace_filter" in listed
    bad = tmp_path / "not-a-trace.json"
    bad.write_text("[1, 2")
    proc = cli("trace", str(bad), "--store", "--db", db)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1
    assert cli("runs", "--db", db).stdout.count(" trace ") == 1   # nothing stored of it
