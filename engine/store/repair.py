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
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

CORRUPT = {11, 26}            # SQLite's primary result codes SQLITE_CORRUPT and SQLITE_NOTADB
SIDECARS = ("-wal", "-shm")   # SQLite's write-ahead log and its index, named after the store's file
PROBLEMS_SHOWN = 3            # quick_check lists up to this many problems in a message
READ_CHUNK = 500
# Parents before children, so each child row can be kept only where its run or experiment was recovered.
TABLES = ("experiments", "runs", "steps", "timeline", "samples", "profiles")
MAX_ROWID = 2 ** 62


class StoreDamaged(sqlite3.DatabaseError):
    """The store at ``path`` failed its check: moved to ``kept_at`` (with its -wal and -shm), or, when other
    processes still had it open or it could not be moved (``why_kept``), left where it was."""

    def __init__(self, path: str, problem: str, kept_at: str | None, why_kept: str | None = None):
        if kept_at is not None:
            done = (f"it was moved to {kept_at} with its -wal and -shm files (nothing deleted), and a fresh store "
                    "starts in its place")
        else:
            done = f"it was left where it is, since {why_kept}"
        super().__init__(f"the run store {path} is damaged ({problem}); {done}")
        self.path, self.problem, self.kept_at, self.why_kept = str(path), problem, kept_at, why_kept

    def __reduce__(self):   # crosses from the store process to the app (engine/store/server.py)
        return StoreDamaged, (self.path, self.problem, self.kept_at, self.why_kept)


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
    """What ``PRAGMA quick_check`` finds wrong with the store at ``path``; None when nothing is, when there is no
    store yet, or when the check could not run for another reason than damage (a lock held past the timeout, an
    I/O error: the open that follows says so, and nothing is moved for it). Read-only: the check writes nothing,
    not even its log's checkpoint."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
        try:
            found = [row[0] for row in db.execute(f"PRAGMA quick_check({PROBLEMS_SHOWN})")]
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:   # "file is not a database", "database disk image is malformed"
        return f"quick_check: {exc}" if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in CORRUPT else None
    if found == ["ok"]:
        return None
    # One line: SQLite puts a "*** in database main ***" header and each page's error on lines of their own.
    problems = [line.strip() for text in found for line in text.splitlines() if line.strip().strip("*").strip()]
    return "quick_check: " + "; ".join(problems)


def other_holders(path: Path) -> list[int]:
    """The processes other than this one that hold SQLite's locks on the store or its index: they have it open
    (Linux's /proc/locks, read without opening the store; elsewhere none are known)."""
    inodes = set()
    for name in (str(path), f"{path}-shm"):
        try:
            st = os.stat(name)
        except OSError:
            continue
        inodes.add(f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}")
    try:
        with open("/proc/locks") as table:
            lines = table.read().splitlines()
    except OSError:
        return []
    pids = set()
    for line in lines:
        fields = line.split()
        if "->" not in fields and len(fields) > 5 and fields[5] in inodes and fields[4].isdigit():
            pids.add(int(fields[4]))
    pids.discard(os.getpid())
    return sorted(pids)


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
    runs and experiments ``target`` does not have yet. ``source`` is opened read-only and read whole first, so
    the store's write lock is held for the inserts alone (a run recording meanwhile waits that long)."""
    db = sqlite3.connect(f"{Path(source).resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
    try:
        tables = {r[0] for r in _rows(db, "SELECT name FROM sqlite_master WHERE type='table'")}
        read = {}
        for table in TABLES:
            columns = _shared_columns(db, target, table) if table in tables else []
            if columns:
                read[table] = (columns, *_readable(db, table, columns))
    finally:
        db.close()
    rows, unreadable = {}, {table: skipped for table, (_, _, skipped) in read.items()}
    target.execute("BEGIN IMMEDIATE")
    try:
        had_runs = {r[0] for r in target.execute("SELECT id FROM runs")}
        had_experiments = {r[0] for r in target.execute("SELECT id FROM experiments")}
        new_runs: set[str] = set()
        for table, (columns, found, _) in read.items():
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
            rows[table] = len(found)
        target.execute("COMMIT")
    except BaseException:
        target.execute("ROLLBACK")
        raise
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
    """Every row SQLite can read, in rowid order, and how many unreadable stretches were stepped over. A read
    that fails keeps the rows before it; the row it failed on is the next rowid, found through the table's
    b-tree alone and skipped; where even the rowids cannot be read (a damaged interior page), the next readable
    one is searched for (doubling the step, then halving back). A damaged page costs the rows on it."""
    select = f"SELECT rowid, {', '.join(columns)} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT {READ_CHUNK}"
    found: list[tuple] = []
    after, skipped, failing = -MAX_ROWID, 0, False
    while True:
        start = after
        try:
            chunk = 0
            for row in db.execute(select, (after,)):
                found.append(row[1:])
                after, chunk = row[0], chunk + 1
            if chunk < READ_CHUNK:
                return found, skipped
            failing = False
            continue
        except sqlite3.DatabaseError:
            pass
        if after > start or not failing:
            skipped, failing = skipped + 1, True   # a new stretch of unreadable rows
        bad = _next_rowid(db, table, after)
        if bad is None:
            bad = _next_readable(db, table, max(after, 0))
            if bad is None:
                return found, skipped
            after = max(bad - 1, after + 1)    # read from there: it may be readable
        else:
            after = bad        # the row the read failed on: skipped


def _next_rowid(db: sqlite3.Connection, table: str, after: int) -> int | None:
    """The next rowid after ``after`` as the table's b-tree says it (None: none, or the b-tree is unreadable
    there, which ``_next_readable`` then steps over)."""
    try:
        row = db.execute(f"SELECT rowid FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 1", (after,)).fetchone()
    except sqlite3.DatabaseError:
        return None
    return row[0] if row else None


def _next_readable(db: sqlite3.Connection, table: str, after: int) -> int | None:
    """The smallest rowid above ``after`` from which the b-tree reads again, roughly (None: nothing readable)."""
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
