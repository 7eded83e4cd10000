"""Run stores for the tests: one with runs in it, the same with pages written over (what a failing disk
leaves) or a table's root lost, one left by a crash with steps in its log alone, and what other processes
and the kernel see of one."""
from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from engine.results import RunSummary, Step
from engine.store import Store
from procs import ROOT

PAGE = 4096   # SQLite's default page size, which the store keeps


def store_with_runs(path: Path, runs: int = 5) -> list[str]:
    """``runs`` finished runs, each with 300 steps (every step's intervals) and 1,000 telemetry samples."""
    with Store(path) as store:
        ids = [store.create_run({"strategy": "single", "n": n}) for n in range(runs)]
        for run_id in ids:
            store.add_steps(run_id, [Step(step=k, t=0.01 * k, time_s=0.01, samples=8, loss=1.0,
                                           intervals={"cpu:0": [["forward", 0.01 * k, 0.01 * k + 0.005]]})
                                     for k in range(300)])
            store.add_samples(run_id, [{"t": 0.1 * i, "device": "cpu:0", "util": 50.0} for i in range(1000)])
            store.finish_run(run_id, "finished", RunSummary(run_id=run_id, strategy="single", steps=300))
    return ids


def write_over_pages(path: Path, at: float = 2 / 3, pages: int = 2) -> None:
    """Random bytes over ``pages`` of the tables' leaf pages, a few pages apart, from ``at`` of the way into the
    file: far from the schema and the runs table (written first), in the steps, intervals and samples written
    after them. Leaf pages of a table (SQLite's b-tree page type 13), not an index's or a free page: their rows
    are then unreadable, which recovery must skip and say (a page picked by position alone was sometimes an
    index's, whose loss a row-by-row copy never meets)."""
    count = path.stat().st_size // PAGE
    noise = random.Random(0)
    with open(path, "r+b") as f:
        leaves = []
        for page in range(int(count * at), count):
            f.seek(page * PAGE)
            if f.read(1) == b"\x0d" and (not leaves or page >= leaves[-1] + 3):
                leaves.append(page)
        assert len(leaves) >= pages, f"only {len(leaves)} table leaf pages after {at:.0%} of {path}"
        for page in leaves[:pages]:
            f.seek(page * PAGE)
            f.write(bytes(noise.randrange(256) for _ in range(PAGE)))


def locks_held(pid: int, path) -> list[str]:
    """The kernel's POSIX locks that ``pid`` holds on ``path``'s file (/proc/locks: pid, then dev:inode)."""
    inode = os.stat(path).st_ino
    held = []
    with open("/proc/locks") as table:
        for line in table:
            fields = line.split()
            if "->" in fields:   # a waiter's line
                continue
            if fields[4] == str(pid) and fields[5].endswith(f":{inode}"):
                held.append(line.strip())
    return held


def write_runs_elsewhere(db, count: int) -> list[str]:
    """``count`` runs written by other processes, each opening the store, writing and closing it (a CLI run's
    way with the store), one after another."""
    code = f"from engine.store import Store\nwith Store({str(db)!r}) as s: print(s.create_run({{'by': 'cli'}}))"
    return [subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           timeout=60).stdout.strip() for _ in range(count)]


def read_elsewhere(db) -> tuple[set[str], bool]:
    """The run ids and the integrity check, as a new process reads them."""
    code = textwrap.dedent(f"""
        import json
        from engine.store import Store
        with Store({str(db)!r}) as s:
            print(json.dumps([[r.id for r in s.list_runs()], s.integrity_ok()]))""")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ids, ok = json.loads(out.stdout)
    return set(ids), ok


def write_over_table(path: Path, table: str) -> None:
    """Random bytes over the root page of ``table``: none of its rows can be reached through it any more,
    while every other table, and ``table``'s indexes, stay as they were."""
    db = sqlite3.connect(path)
    try:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    finally:
        db.close()
    noise = random.Random(1)
    with open(path, "r+b") as f:
        f.seek((root - 1) * PAGE)
        f.write(bytes(noise.randrange(256) for _ in range(PAGE)))


def crash_with_steps_in_the_log(path: Path, steps: int = 50) -> str:
    """A run whose row is in the store file (checkpointed) and whose ``steps`` are only in the write-ahead log:
    its process ends without closing the store (as a killed one), leaving the log and its index behind."""
    code = textwrap.dedent(f"""
        import os
        from engine.results import Step
        from engine.store import Store
        store = Store({str(path)!r})
        run_id = store.create_run({{"strategy": "single"}})
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.add_steps(run_id, [Step(step=k, t=0.1 * k, time_s=0.1) for k in range({steps})])
        print(run_id, flush=True)
        os._exit(0)""")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(f"{path}-wal").stat().st_size > 0 and Path(f"{path}-shm").exists()
    return done.stdout.strip()
