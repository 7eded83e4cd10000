"""What a damaged or misplaced store gives back and says (engine/store/salvage.py, repair.py, location.py,
command.py): a store cut short recovered row by row, runs rebuilt from their ids, sqlite3's .recover taken
where it reads more, a deleted log said, and --db paths that cannot hold a store refused in one line."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine import cli as engine_cli
from engine.results import RunSummary
from engine.store import Store
from engine.store.location import StoreLocationError
from engine.store.schema import RECOVERED_PARTIAL
from helpers import cli
from procs import ROOT
from store_helpers import crash_with_steps_in_the_log, store_with_runs, write_over_table

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

TABLES = ("runs", "steps", "timeline", "samples")


def kept_copy(folder: Path) -> Path:
    (name,) = [p.name for p in folder.iterdir() if ".damaged-" in p.name and p.suffix == ".sqlite3"]
    return folder / name


def row_by_row(path: Path, whole: Path) -> dict[str, list[tuple]]:
    """What SQLite itself reads of ``path``, with ``writable_schema`` on and each rowid the whole store had
    asked for alone, stepping over every one that fails: the rows that read back as they were stored (a page
    cut in half reads as zeros, which are not rows that were written)."""
    with sqlite3.connect(whole) as reference:
        stored = {t: {r[0]: r[1:] for r in reference.execute(f"SELECT rowid, * FROM {t}")} for t in TABLES}
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    db.execute("PRAGMA writable_schema=ON")
    found = {}
    try:
        for table, rows in stored.items():
            found[table] = []
            for rowid in range(1, max(rows, default=0) + 1):
                try:
                    row = db.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
                except sqlite3.DatabaseError:
                    continue
                if row is not None and row == rows.get(rowid):
                    found[table].append(row)
    finally:
        db.close()
    return found


def test_a_store_cut_to_half_gives_back_at_least_what_a_row_by_row_read_of_it_gets(tmp_path):
    db = tmp_path / "runs.sqlite3"
    ids = store_with_runs(db, runs=5)
    whole = tmp_path / "whole.sqlite3"
    shutil.copy(db, whole)
    os.truncate(db, db.stat().st_size // 2)       # truncate -s HALF: not a whole number of pages
    sqlite_reads = row_by_row(db, whole)
    assert sqlite_reads["steps"], "the cut store has steps SQLite can read: the test needs some"

    listed = cli("runs", "--db", str(db))
    assert listed.returncode == 1 and "is damaged" in listed.stderr   # set aside, a fresh store in its place
    kept = kept_copy(tmp_path)
    recovered = cli("recover", str(kept), "--db", str(db))
    assert recovered.returncode == 0, recovered.stderr
    message = recovered.stdout.strip()
    assert message.startswith("recovered ") and "seen but unreadable: " in message, message

    with Store(db) as store, Store(whole) as original:
        runs = {r.id: r for r in store.list_runs()}
        read_runs = {row[0] for row in sqlite_reads["runs"]} | {row[0] for t in TABLES[1:] for row in sqlite_reads[t]}
        assert read_runs <= set(runs) <= set(ids)
        got = {"steps": [s for i in runs for s in store.steps(i)],
               "timeline": [r for i in runs for r in store.timeline(i)],
               "samples": [s for i in runs for s in store.samples(i)]}
        for table, rows in got.items():
            assert len(rows) >= len(sqlite_reads[table]), table
        # What came back is what was stored: no row of zeros or fragments from the page cut in half.
        for run_id in runs:
            stored_steps = {s.step: s for s in original.steps(run_id)}
            assert all(stored_steps[s.step] == s for s in store.steps(run_id))
            assert set(store.timeline(run_id)) <= set(original.timeline(run_id))
        assert f"{len(got['steps']):,} steps" in message and f"recovered {len(runs)} run" in message
        for record in runs.values():
            assert record.status == RECOVERED_PARTIAL
            assert record.error.startswith(f"{RECOVERED_PARTIAL} from {kept}: ") and " came back" in record.error
            if record.summary is None:   # its own row lost with the pages cut off: rebuilt from its id
                assert "its settings are unknown (rebuilt from its id)" in record.error
                assert record.started > 0   # the id's time


def test_runs_whose_own_rows_are_lost_come_back_rebuilt_from_their_ids_with_all_their_steps(tmp_path):
    db = tmp_path / "runs.sqlite3"
    ids = store_with_runs(db, runs=3)
    write_over_table(db, "runs")
    with Store(tmp_path / "into.sqlite3") as store:
        recovery = store.recover_from(db)
        assert (recovery.runs, recovery.rebuilt, recovery.partial) == (3, 3, 3)
        assert recovery.rows == {"steps": 900, "timeline": 900, "samples": 3000, "profiles": 0}
        assert recovery.unreadable["runs"] == 3   # the runs' index still names them
        text = recovery.describe()
        assert text.startswith(f"recovered 3 runs and 0 experiments from {db} (3 rebuilt from their ids, their "
                               "settings unknown): 900 steps, 900 intervals, 3,000 telemetry samples; 3 marked "
                               f"{RECOVERED_PARTIAL}; seen but unreadable: 3 runs' rows"), text
        for run_id in ids:
            record = store.get_run(run_id)
            assert record.status == RECOVERED_PARTIAL and record.summary is None
            assert record.error == (f"{RECOVERED_PARTIAL} from {db}: 300 steps, 300 intervals, 1,000 telemetry "
                                    "samples came back; its own row was lost, so its settings are unknown "
                                    "(rebuilt from its id)")
            assert store.step_count(run_id) == 300


def test_a_recovery_that_brings_back_no_run_says_why(tmp_path):
    """"recovered 0 runs" alone left the user guessing (issue 54): an empty file, one that is not SQLite, and a
    store whose runs are in the target already each say so."""
    (tmp_path / "empty.sqlite3").write_bytes(b"")
    (tmp_path / "noise.sqlite3").write_bytes(bytes(range(256)) * 64)
    db = tmp_path / "runs.sqlite3"
    store_with_runs(db, runs=2)
    with Store(tmp_path / "into.sqlite3") as store:
        said = {name: store.recover_from(tmp_path / f"{name}.sqlite3").describe() for name in ("empty", "noise")}
        assert "(the file is empty)" in said["empty"], said
        assert "(the file is not an SQLite database" in said["noise"], said
        assert store.recover_from(db).runs == 2
        again = store.recover_from(db)
        assert again.runs == 0 and "(its 2 runs are in this store already)" in again.describe(), again.describe()


def test_sqlite3_recover_is_used_where_it_reads_more(tmp_path, monkeypatch):
    """Where the ``sqlite3`` command's .recover gets more rows than the row-by-row read, its rows are kept (here
    a stand-in for the command, which gives the whole store's SQL: Debian's sqlite3 lacks .recover's
    sqlite_dbpage, and gives nothing)."""
    db = tmp_path / "runs.sqlite3"
    ids = store_with_runs(db, runs=2)
    whole = tmp_path / "whole.sqlite3"
    shutil.copy(db, whole)
    os.truncate(db, db.stat().st_size // 2)
    command = tmp_path / "bin" / "sqlite3"
    command.parent.mkdir()
    command.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import sqlite3, sys
        if sys.argv[1] != "-readonly" or sys.argv[3:] != [".recover"]:   # on the store or a copy of its pages
            sys.exit(f"unexpected arguments {{sys.argv[1:]}}")
        for line in sqlite3.connect({str(whole)!r}).iterdump():
            print(line)
        """))
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{command.parent}{os.pathsep}{os.environ['PATH']}")
    with Store(tmp_path / "into.sqlite3") as store:
        recovery = store.recover_from(db)
        assert recovery.runs == 2 and recovery.rebuilt == 0
        assert recovery.rows == {"steps": 600, "timeline": 600, "samples": 2000, "profiles": 0}
        assert recovery.readers["steps"] == "sqlite3 .recover"
        assert "; read by sqlite3 .recover: " in recovery.describe()
        with Store(whole) as original:
            assert [store.steps(i) for i in ids] == [original.steps(i) for i in ids]


def test_a_deleted_log_is_said_on_the_run_it_cost_and_by_the_command_that_found_it(tmp_path, capsys):
    db = tmp_path / "runs.sqlite3"
    run_id = crash_with_steps_in_the_log(db)
    os.remove(f"{db}-wal")
    assert engine_cli.main(["runs", "--db", str(db), "--json"]) == 0
    out, err = capsys.readouterr()
    (run,) = json.loads(out)
    assert run["id"] == run_id and run["status"] == "interrupted"
    assert run["error"].startswith(f"its last steps may be lost: its write-ahead log {db}-wal is missing, yet its "
                                   f"index {db}-shm says the log held ")
    (line,) = err.strip().splitlines()
    assert line.startswith(f"warning: the run store {db}: its write-ahead log {db}-wal is missing")
    with Store(db) as store:
        assert store.step_count(run_id) == 0   # lost: what SQLite can tell is that it was, not what it was


def test_a_crash_that_kept_its_log_loses_nothing_and_says_nothing(tmp_path, capsys):
    db = tmp_path / "runs.sqlite3"
    run_id = crash_with_steps_in_the_log(db)
    assert engine_cli.main(["runs", "--db", str(db), "--json"]) == 0
    out, err = capsys.readouterr()
    (run,) = json.loads(out)
    assert run["status"] == "interrupted" and run["error"] is None and err == ""
    with Store(db) as store:
        assert store.step_count(run_id) == 50


LONG_NAME = "a" * 300 + ".sqlite3"


@pytest.mark.parametrize("argv", [["runs"], ["runs", "--json"], ["run"], ["watch", "--", "train.py"],
                                  ["recover", "kept.sqlite3"], ["export", "some-run", "--format", "csv", "--out", "x"],
                                  ["what-if", "some-run"]], ids=lambda argv: argv[0])
def test_a_store_name_too_long_is_one_line_naming_the_option_and_the_limit(argv, tmp_path, capsys):
    db = tmp_path / LONG_NAME
    assert engine_cli.main([argv[0], "--db", str(db), *argv[1:]]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    verb = "read" if argv[0] in ("runs", "export", "what-if") else "write"
    assert line == (f"error: --db: cannot {verb} the run store at {db}: the store's file name is 308 bytes long; "
                    "at most 224 (the file system allows 255, less 31 for the names SQLite's log and a damaged "
                    "copy add to it)")
    assert list(tmp_path.iterdir()) == []


def test_no_folder_is_made_for_a_store_the_user_names_only_for_the_default_one(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "no" / "such" / "folder" / "runs.sqlite3"
    assert engine_cli.main(["runs", "--db", str(missing)]) == 2
    assert capsys.readouterr().err == (f"error: --db: cannot read the run store at {missing}: there is no folder "
                                       f"{missing.parent} (folders are made only for the default store: make it "
                                       "first)\n")
    monkeypatch.setenv("SPLITSCOPE_DB", str(missing))
    assert engine_cli.main(["runs"]) == 2
    assert capsys.readouterr().err.startswith("error: SPLITSCOPE_DB: cannot read the run store at ")
    with pytest.raises(StoreLocationError, match="there is no folder"):
        Store(missing)
    assert list(tmp_path.iterdir()) == []

    monkeypatch.delenv("SPLITSCOPE_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with Store() as store:   # the user data folder's store: its folders are made
        assert store.path == tmp_path / "data" / "splitscope" / "splitscope.sqlite3" and store.path.is_file()


def test_runs_json_holds_no_infinity_or_nan(tmp_path, capsys):
    db = tmp_path / "runs.sqlite3"
    with Store(db) as store:   # as a store written before --lr was checked keeps them
        run_id = store.create_run({"strategy": "single", "lr": float("inf")})
        store.finish_run(run_id, "finished", RunSummary(run_id=run_id, steps=3, param_norm=float("nan")))
    assert engine_cli.main(["runs", "--db", str(db), "--json"]) == 0

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")
    (run,) = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert run["config"]["lr"] is None and run["summary"]["param_norm"] is None and run["summary"]["steps"] == 3


def without_root_override() -> list[str]:
    """A command prefix under which file modes hold: root's CAP_DAC_OVERRIDE dropped (setpriv), as the suite
    runs as root on the project's machines; none needed for another user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to make a file mode hold")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


@pytest.mark.parametrize("made_read_only", ["file", "folder"])
def test_a_read_only_store_is_listed_read_only_and_saying_so_and_nothing_is_written_to_it(made_read_only,
                                                                                           tmp_path):
    folder = tmp_path / "stores"
    folder.mkdir()
    db = folder / "runs.sqlite3"
    (run_id,) = store_with_runs(db, runs=1)
    other = tmp_path / "other.sqlite3"
    other.write_bytes(b"")
    target = db if made_read_only == "file" else folder
    mode = target.stat().st_mode
    target.chmod(0o444 if made_read_only == "file" else 0o555)
    before = db.read_bytes()
    try:
        def main(*args):
            return subprocess.run([*without_root_override(), sys.executable, str(ROOT / "main.py"), *args],
                                  cwd=ROOT, capture_output=True, text=True, timeout=60)
        why = "the file is not writable" if made_read_only == "file" else f"its folder {folder} is not writable"
        listed = main("runs", "--db", str(db), "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
        assert listed.stderr == (f"note: the run store {db} is read-only ({why}): opened to read it, nothing "
                                 "written\n")
        refused = main("recover", str(other), "--db", str(db))
        assert refused.returncode == 2
        assert refused.stderr == (f"error: --db: the run store {db} is read-only ({why}): nothing can be recovered "
                                  "into it\n")
        assert db.read_bytes() == before
    finally:
        target.chmod(mode)
