"""Telemetry recorded with a run, measured by the OS outside the worker (issue 3: "Must show")."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.cores import usable_cores
from engine.store import Store
from helpers import cli

pytestmark = pytest.mark.solo   # compares figures that load moves: `make test` runs these alone

MLP = ["--model", "mlp", "--width", "512", "--depth", "8", "--batch-size", "2048", "--steps", "12",
       "--devices", "cpu:2", "--json"]


@pytest.fixture(scope="module")
def runs(naive_split_and_pipeline):
    """(db, naive split, pipeline): the session's (tests/conftest.py)."""
    return naive_split_and_pipeline


def test_naive_split_devices_are_busy_about_half_the_time(runs):
    _, naive, _ = runs
    util = naive["telemetry"]["util_mean"]
    # Here 50-57; a loaded CI machine read 58.9 where the engine timed 46.1: the core also runs what else is
    # ready when the rank waits (see the next-but-one test).
    assert len(util) == 2 and all(35 <= u <= 70 for u in util), util


def test_pipeline_raises_each_device_by_ten_points(runs):
    _, naive, piped = runs
    assert len(naive["telemetry"]["util_mean"]) == len(piped["telemetry"]["util_mean"]) == 2
    for before, after in zip(naive["telemetry"]["util_mean"], piped["telemetry"]["util_mean"], strict=True):
        assert after >= before + 10, (naive["telemetry"], piped["telemetry"])


def test_the_engines_busy_share_and_the_oss_reading_are_told_apart_where_they_differ(runs):
    """Two independent readings of one thing: the engine's timers and the kernel's run and run-queue time of
    the rank's threads on the device's core (engine/telemetry/cpu_target.py). The threads also run the
    pipelining library's Python between the timed spans (the OS reads a few points higher): how far apart is
    the machine's, not a behaviour. What holds: readings are shares, others' part of a core is never
    negative, and the summary names exactly the devices more than 10 points apart."""
    _, naive, piped = runs
    for summary in (naive, piped):
        devices, telemetry = summary["devices"], summary["telemetry"]
        assert len(telemetry["util_mean"]) == len(devices) == 2, telemetry
        assert all(0 <= util <= 100.5 for util in telemetry["util_mean"]), telemetry
        assert all(other is not None and other >= 0 for other in telemetry["other_mean"]), telemetry
        gaps = [util - 100 * busy for util, busy in zip(telemetry["util_mean"], summary["devices_busy"], strict=True)]
        flagged = [name for name, gap in zip(devices, gaps, strict=True) if abs(gap) > 10]
        note = telemetry["disagreement"] or ""
        assert [name for name in devices if note.startswith(f"{name}:") or f"; {name}:" in note] == flagged, note


BURN = ("import os, sys\n"
        "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
        "while True: pass")


@pytest.mark.skipif(len(usable_cores()) < 2 or not hasattr(os, "SCHED_IDLE"), reason="needs 2 cores and Linux")
def test_another_program_on_a_devices_core_neither_reads_as_the_runs_work_nor_goes_unsaid(tmp_path):
    """A naive split on cpu:2 while another program burns cpu:1's core whenever the run leaves it idle (at the
    idle priority, so it takes none of the run's time): the core's total reads about 100 % but the device reads
    its own work, near the engine's busy share as on a quiet machine (see below for how near), and the run is
    marked disturbed with the other program's share."""
    burner = subprocess.Popen([sys.executable, "-c", BURN, str(usable_cores()[1])])
    try:
        _, summary = cli("run", *MLP, "--strategy", "model-parallel", "--db", str(tmp_path / "runs.sqlite3"),
                         check_json=True, timeout=300)
    finally:
        burner.kill()
        burner.wait()
    telemetry = summary["telemetry"]
    (util_0, util_1), (busy_0, busy_1) = telemetry["util_mean"], summary["devices_busy"]
    # Even at the idle priority the other program gets slices on this kernel (6.18's EEVDF scheduler): the
    # step slows and cpu:1's timed spans hold moments in which the rank waited for the burner's slice. The
    # engine counts them busy and so does the device (its threads' run-queue time): 56.6 and 60.6 % against
    # the engine's 54.8 and 58.0 in two runs, where their run time alone read 6-15 points below.
    for util, busy in ((util_0, busy_0), (util_1, busy_1)):
        assert abs(util - 100 * busy) <= 10, (telemetry, summary["devices_busy"])
    taken = telemetry["other_mean"][1]
    assert taken > 25 and taken + telemetry["util_mean"][1] > 80, telemetry   # the burner filled the idle half
    assert telemetry["disturbed"].startswith("other programs took") and f"{taken:.0f}% of cpu:1" in \
        telemetry["disturbed"], telemetry
    from engine.cli.report import summary_table
    from engine.results import RunSummary, from_json
    lines = summary_table(from_json(RunSummary, summary)).splitlines()
    assert any(line.startswith("disturbed ") and line.endswith(telemetry["disturbed"]) for line in lines), lines


def test_every_device_has_nine_samples_per_second_of_run(runs):
    db, naive, _ = runs
    with Store(db) as store:
        run = store.get_run(naive["run_id"])
        samples = store.samples(run.id)
        steps = store.steps(run.id)
    start, end = steps[0].t - steps[0].time_s, steps[-1].t
    for device in naive["devices"]:
        in_run = [s for s in samples if s.device == device and start <= s.t <= end]
        assert len(in_run) >= 9 * (end - start), (device, len(in_run), end - start)
    assert naive["telemetry"]["samples"] == len(samples)
    assert naive["telemetry"]["rate_hz"] == 10


def test_each_rank_memory_is_followed_from_its_launch(runs):
    """The `launched` event names the rank processes at once: their RSS is read as it comes (engine/
    telemetry/sampler.py set_pid), while they build the model and join the group, and it grows as they do."""
    db, naive, _ = runs
    with Store(db) as store:
        samples = store.samples(naive["run_id"])
        first = store.steps(naive["run_id"])[0]
    for device in naive["devices"]:
        rss = [(s.t, s.mem_used) for s in samples if s.device == device and s.mem_used is not None]
        assert rss and rss[0][0] < first.t, (device, rss[:3], first)  # read before the first step was done
        # The model, its gradients and 2048-sample batches: tens of MB on top of torch's hundreds.
        assert max(m for _, m in rss) - min(m for _, m in rss) > 20 * 2**20, (device, rss)
