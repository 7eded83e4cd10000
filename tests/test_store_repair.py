"""A damaged run store (engine/store/repair.py): found before it is used, set aside whole, a fresh store in its
place, and what can be read of it recovered on request. No command ends in a traceback."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from engine.store import Store, StoreDamaged
from engine.store.repair import damage
from engine.store.schema import RECOVERED_PARTIAL
from helpers import cli
from store_helpers import store_with_runs, write_over_pages

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def kept_files(folder, name="runs"):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f"{name}.damaged-"))


def test_a_damaged_store_is_set_aside_by_any_command_which_says_so_in_one_line_and_exits_1(tmp_path):
    db = tmp_path / "runs.sqlite3"
    ids = store_with_runs(db)
    write_over_pages(db)
    damaged_bytes = db.read_bytes()
    assert damage(db) is not None

    listed = cli("runs", "--db", str(db))
    assert listed.returncode == 1
    lines = listed.stderr.strip().splitlines()
    assert len(lines) == 1, listed.stderr   # SQLite's page errors come on lines of their own: joined
    line = lines[0]
    kept = tmp_path / kept_files(tmp_path)[0]
    assert line.startswith(f"error: the run store {db} is damaged (quick_check: ")
    assert f"moved to {kept}" in line and f"python main.py recover {kept} --db {db}" in line
    assert kept.read_bytes() == damaged_bytes        # nothing written to it, nothing deleted
    assert kept_files(tmp_path) == [kept.name, f"{kept.name}-shm", f"{kept.name}-wal"]

    assert cli("runs", "--db", str(db)).stdout.strip() == "no runs stored yet"   # a fresh store took its place

    recovered = cli("recover", str(kept), "--db", str(db))
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.stdout.startswith(f"recovered 5 runs and 0 experiments from {kept}")
    assert "unreadable stretches skipped in" in recovered.stdout
    runs = json.loads(cli("runs", "--db", str(db), "--json").stdout)
    assert sorted(r["id"] for r in runs) == sorted(ids)
    assert all(r["summary"]["steps"] == 300 for r in runs)
    with Store(db) as store:
        assert store.integrity_ok()
        steps = sum(store.step_count(i) for i in ids)
        intervals = sum(len(store.timeline(i)) for i in ids)
        samples = sum(store.sample_span(i)[0] for i in ids)
        assert 0 < steps <= 1500 and 0 < intervals <= 1500 and 0 < samples <= 5000
        assert steps + intervals + samples < 8000   # but for the rows on the damaged pages
        # The tables' indexes were not hit: whose rows were lost is known, and those runs alone are partial.
        for run in runs:
            whole = (store.step_count(run["id"]), len(store.timeline(run["id"])),
                     store.sample_span(run["id"])[0]) == (300, 300, 1000)
            assert run["status"] == ("finished" if whole else RECOVERED_PARTIAL), run
            if not whole:
                assert run["error"].startswith(f"{RECOVERED_PARTIAL} from {kept}: ")
                assert "it was finished" in run["error"]
        assert any(run["status"] == RECOVERED_PARTIAL for run in runs)
    assert "seen but unreadable: " in recovered.stdout and "marked recovered (partial)" in recovered.stdout

    again = cli("recover", str(kept), "--db", str(db))   # the runs are there already: nothing doubles
    assert again.stdout.startswith("recovered 0 runs")
    with Store(db) as store:
        assert sum(store.step_count(i) for i in ids) == steps


def test_recover_refuses_what_it_cannot_copy_from(tmp_path):
    missing = cli("recover", str(tmp_path / "nothing.sqlite3"), "--db", str(tmp_path / "runs.sqlite3"))
    assert missing.returncode == 2 and missing.stderr.strip() == f"error: recover: no file {tmp_path / 'nothing.sqlite3'}"
    db = tmp_path / "runs.sqlite3"
    store_with_runs(db, runs=1)
    itself = cli("recover", str(db), "--db", str(db))
    assert itself.returncode == 2 and "is the run store itself" in itself.stderr


def test_a_file_that_is_no_database_is_set_aside_too_and_a_run_still_gets_a_store(tmp_path):
    db = tmp_path / "runs.sqlite3"
    db.write_bytes(b"these are not the pages you are looking for" * 100)
    try:
        Store(db)
    except StoreDamaged as exc:
        assert "file is not a database" in exc.problem and exc.path == str(db)
        assert (tmp_path / kept_files(tmp_path)[0]).read_bytes().startswith(b"these are not")
    else:
        raise AssertionError("a store that is no database opened")
    with Store(db) as store:
        assert store.list_runs() == []


def test_recovery_skips_each_unreadable_stretch_and_keeps_the_rows_on_either_side(tmp_path):
    db = tmp_path / "runs.sqlite3"
    ids = store_with_runs(db, runs=3)
    whole = tmp_path / "whole.sqlite3"
    shutil.copy(db, whole)
    write_over_pages(db, at=0.5, pages=3)
    with Store(tmp_path / "into.sqlite3") as store:
        recovery = store.recover_from(db)
        assert recovery.runs == 3 and sum(recovery.unreadable.values()) >= 1
        with Store(whole) as reference:
            for run_id in ids:
                theirs = {s.step for s in reference.steps(run_id)}
                ours = {s.step for s in store.steps(run_id)}
                assert ours <= theirs
            # Rows after a damaged stretch come back: the last run's last samples are there.
            assert store.samples(ids[-1])[-1] == reference.samples(ids[-1])[-1]


def test_a_damaged_store_another_process_has_open_is_left_where_it_is(tmp_path):
    """Renamed under a process that has it open, the store would go on in the kept copy for that process, and its
    last close would delete the log of the fresh store at the old name."""
    db = tmp_path / "runs.sqlite3"
    store_with_runs(db)
    write_over_pages(db)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, sys
        db = sqlite3.connect({str(db)!r})
        db.execute("SELECT COUNT(*) FROM runs").fetchone()   # a reader holds its lock from here on
        print("open", flush=True)
        sys.stdin.read()""")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        listed = cli("runs", "--db", str(db))
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert listed.returncode == 1
    assert listed.stderr.strip() == (f"error: the run store {db} is damaged ({damage(db)}); it was left where it "
                                     f"is, since processes {holder.pid} have it open: close them, and the next "
                                     "open moves it aside")
    assert kept_files(tmp_path) == []
    assert cli("runs", "--db", str(db)).returncode == 1 and kept_files(tmp_path)   # alone now: moved aside
