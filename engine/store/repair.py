"""A damaged run store: found before a process first uses it, set aside whole, its readable rows copied back.

``damage(path)`` runs SQLite's ``PRAGMA quick_check`` on a read-only connection.
``set_aside(path)`` renames the store with its ``-wal`` and ``-shm`` files to
``NAME.damaged-STAMP.sqlite3`` (and ``...-wal``, ``...-shm``, so the kept copy
still opens with its log); nothing is deleted, and the next open starts a fresh
store in its place. ``copy_readable(source, target)`` reads each of the store's
tables in rowid order from the kept copy, steps over the stretches SQLite
cannot read, and inserts what it could read into the current store, runs and
experiments not already there with their steps, intervals, telemetry and
profiles. It needs nothing but Python's sqlite3 (no ``sqlite3`` command).

No imports from the rest of the store: ``database.py`` calls ``damage`` on its
first open of a path, and its ``recover_from`` hands its connection here.
"""
from __future__ import annotations

import itertools
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

SIDECARS = ("-wal", "-shm")   # SQLite's write-ahead log and its index, named after the store's file
PROBLEMS_SHOWN = 3            # quick_check lists up to this many problems in a message
READ_CHUNK = 500
# Parents before children, so each child row can be kept only where its run or experiment was recovered.
TABLES = ("experiments", "runs", "steps", "timeline", "samples", "profiles")
CHILDREN_OF_RUNS = ("steps", "timeline", "samples", "profiles")
MAX_ROWID = 2 ** 62


class StoreDamaged(sqlite3.DatabaseError):
    """The store at ``path`` failed its check and was moved to ``kept_at`` (with its -wal and -shm)."""

    def __init__(self, path: str, problem: str, kept_at: str):
        super().__init__(f"the run store {path} is damaged ({problem}); it was moved to {kept_at} with its -wal "
                         f"and -shm files (nothing deleted), and a fresh store starts in its place")
        self.path, self.problem, self.kept_at = str(path), problem, str(kept_at)

    def __reduce__(self):   # crosses from the store process to the app (engine/store/server.py)
        return StoreDamaged, (self.path, self.problem, self.kept_at)


@dataclass(frozen=True)
class Recovery:
    """What ``copy_readable`` brought back from a kept store."""
    source: str
    runs: int
    experiments: int
    rows: dict[str, int] = field(default_factory=dict)        # table -> rows inserted
    unreadable: dict[str, int] = field(default_factory=dict)  # table -> stretches SQLite could not read

    def describe(self) -> str:
        lost = sum(self.unreadable.values())
        text = (f"recovered {self.runs} run{'s' if self.runs != 1 else ''} and {self.experiments} "
                f"experiment{'s' if self.experiments != 1 else ''} from {self.source}")
        if lost:
            where = ", ".join(f"{table} ({n})" for table, n in self.unreadable.items() if n)
            text += f"; unreadable stretches skipped in {where}"
        return text


def damage(path: Path) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with the store at ``path``; None when nothing is, or there is no
    store yet. Read-only: the check writes nothing, not even its log's checkpoint."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
        try:
            found = [row[0] for row in db.execute(f"PRAGMA quick_check({PROBLEMS_SHOWN})")]
        finally:
            db.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return None      # a writer held it past the timeout: not a sign of damage
        return f"quick_check: {exc}"
    except sqlite3.DatabaseError as exc:   # "file is not a database", "database disk image is malformed"
        return f"quick_check: {exc}"
    return None if found == ["ok"] else "quick_check: " + "; ".join(found)


def set_aside(path: Path) -> Path:
    """Move the store and its sidecar files to a new name beside it; returns the store's new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in itertools.count():
        kept = path.with_name(f"{path.stem}.damaged-{stamp}{f'-{n}' if n else ''}{path.suffix}")
        if not any(Path(f"{kept}{s}").exists() for s in ("", *SIDECARS)):
            break
    # The log first: a store opened at the old name between the two renames must not replay a log that is
    # not its own onto a fresh file.
    for suffix in SIDECARS:
        try:
            Path(f"{path}{suffix}").rename(f"{kept}{suffix}")
        except FileNotFoundError:
            pass
    path.rename(kept)
    return kept


def copy_readable(source: Path, target: sqlite3.Connection) -> Recovery:
    """Insert into ``target`` (the store's open connection) every row of ``source`` that SQLite can read, for the
    runs and experiments ``target`` does not have yet. ``source`` is opened read-only."""
    db = sqlite3.connect(f"{Path(source).resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
    try:
        tables = {r[0] for r in _rows(db, "SELECT name FROM sqlite_master WHERE type='table'")}
        had_runs = {r[0] for r in target.execute("SELECT id FROM runs")}
        had_experiments = {r[0] for r in target.execute("SELECT id FROM experiments")}
        rows, unreadable = {}, {}
        new_runs: set[str] = set()
        target.execute("BEGIN IMMEDIATE")
        try:
            for table in TABLES:
                if table not in tables:
                    continue
                columns = _shared_columns(db, target, table)
                if not columns:
                    continue
                found, skipped = _readable(db, table, columns)
                key = columns.index("id") if table in ("runs", "experiments") else columns.index("run_id")
                if table == "experiments":
                    found = [r for r in found if r[key] not in had_experiments]
                elif table == "runs":
                    found = [r for r in found if r[key] not in had_runs]
                    # A run whose experiment was lost keeps its rows, not a reference to nothing.
                    experiments = {r[0] for r in target.execute("SELECT id FROM experiments")}
                    if "experiment_id" in columns:
                        e = columns.index("experiment_id")
                        found = [(*r[:e], r[e] if r[e] in experiments else None, *r[e + 1:]) for r in found]
                    new_runs = {r[key] for r in found}
                else:
                    found = [r for r in found if r[key] in new_runs]
                target.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) "
                                   f"VALUES ({', '.join('?' * len(columns))})", found)
                rows[table], unreadable[table] = len(found), skipped
            target.execute("COMMIT")
        except BaseException:
            target.execute("ROLLBACK")
            raise
    finally:
        db.close()
    return Recovery(str(source), rows.get("runs", 0), rows.get("experiments", 0), rows, unreadable)


def _shared_columns(source: sqlite3.Connection, target: sqlite3.Connection, table: str) -> list[str]:
    """The columns both stores have (an older store lacks the newer ones), in the target's order."""
    theirs = {r[1] for r in _rows(source, f"PRAGMA table_info({table})")}
    return [r[1] for r in target.execute(f"PRAGMA table_info({table})") if r[1] in theirs]


def _rows(db: sqlite3.Connection, sql: str, args=()) -> list[tuple]:
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.DatabaseError:
        return []


def _readable(db: sqlite3.Connection, table: str, columns: list[str]) -> tuple[list[tuple], int]:
    """Every row SQLite can read, in rowid order, and how many unreadable stretches were stepped over: a read
    that fails keeps the rows before it, then the next readable rowid is searched for (doubling the step, then
    halving back), so one damaged page costs the rows on it and no more."""
    select = f"SELECT rowid, {', '.join(columns)} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT {READ_CHUNK}"
    found: list[tuple] = []
    after, skipped = -MAX_ROWID, 0
    while True:
        start = after
        try:
            chunk = 0
            for row in db.execute(select, (after,)):
                found.append(row[1:])
                after, chunk = row[0], chunk + 1
            if chunk < READ_CHUNK:
                return found, skipped
            continue
        except sqlite3.DatabaseError:
            pass
        skipped += 1
        # Nothing read since the last search found a start: that row itself is unreadable, search past it.
        resume = _next_readable(db, table, max(after if after > start else start + 1, 0))
        if resume is None:
            return found, skipped
        after = resume - 1


def _next_readable(db: sqlite3.Connection, table: str, after: int) -> int | None:
    """The smallest rowid above ``after`` from which a read succeeds, roughly (None: nothing readable)."""
    def reads_from(rowid: int) -> bool:
        try:
            db.execute(f"SELECT rowid FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT 1", (rowid,)).fetchall()
            return True
        except sqlite3.DatabaseError:
            return False
    step = 1
    while not reads_from(after + step):
        step *= 2
        if after + step > MAX_ROWID:
            return None
    low, high = after + step // 2, after + step   # low fails (or is ``after`` itself), high reads
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reads_from(middle) else (middle, high)
    return high
