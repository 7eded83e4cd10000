"""A damaged run store: found before a process first uses it, set aside whole, what can be read of it copied back.

``damage(path)`` runs SQLite's ``PRAGMA quick_check`` on a read-only connection.
``set_aside(path)`` renames the store with its ``-wal`` and ``-shm`` files to
``NAME.damaged-STAMP.sqlite3`` (and ``...-wal``, ``...-shm``, so the kept copy
still opens with its log); nothing is deleted, and the next open starts a fresh
store in its place. ``copy_readable(source, target)`` reads the kept copy as far
as SQLite can (``salvage.py``: row by row with ``writable_schema``, and
``sqlite3 .recover`` where that command has it) and inserts the runs and
experiments not already there with their steps, intervals, telemetry and
profiles: a run whose rows did not all come back is marked ``recovered
(partial)``, and one whose own row was lost is rebuilt from its id.
``lost_log(path)`` tells, before SQLite first opens a store, that its
write-ahead log was deleted with writes in it.

No imports from the rest of the store: ``database.py`` calls ``damage`` and
``lost_log`` on its first open of a path, and its ``recover_from`` hands its
connection here.
"""
from __future__ import annotations

import itertools
import os
import sqlite3
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.store import salvage
from engine.store.schema import RECOVERED_PARTIAL

CORRUPT = {11, 26}            # SQLite's primary result codes SQLITE_CORRUPT and SQLITE_NOTADB
SIDECARS = ("-wal", "-shm")   # SQLite's write-ahead log and its index, named after the store's file
PROBLEMS_SHOWN = 3            # quick_check lists up to this many problems in a message
# Parents before children, so each child row can be kept only where its run or experiment was recovered.
TABLES = ("experiments", "runs", "steps", "timeline", "samples", "profiles")
CHILD_TABLES = TABLES[2:]     # a run's rows


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
    unreadable: dict[str, int] = field(default_factory=dict)  # table -> rows its index saw that could not be read
    stretches: dict[str, int] = field(default_factory=dict)   # table -> unreadable stretches stepped over
    rebuilt: int = 0            # runs whose row was lost, rebuilt from their id (their settings unknown)
    partial: int = 0            # runs marked RECOVERED_PARTIAL
    readers: dict[str, str] = field(default_factory=dict)     # table -> whose rows were kept (salvage.py)
    why_none: str = ""          # where nothing came back: why (an empty file, not SQLite, ...)

    def describe(self) -> str:
        text = (f"recovered {_plural(self.runs, 'run', 'runs')} and "
                f"{_plural(self.experiments, 'experiment', 'experiments')} from {self.source}")
        if self.why_none:
            text += f" ({self.why_none})"
        if self.rebuilt:
            text += f" ({self.rebuilt} rebuilt from their ids, their settings unknown)"
        text += ": " + ", ".join(_rows(self.rows.get(t, 0), t) for t in CHILD_TABLES
                                 if self.rows.get(t) or t != "profiles")
        if self.partial:
            text += f"; {self.partial} marked {RECOVERED_PARTIAL}"
        lost = [_rows(n, t) for t, n in self.unreadable.items() if n]
        if lost:
            text += f"; seen but unreadable: {', '.join(lost)}"
        if any(self.stretches.values()):
            text += "; unreadable stretches skipped in " + ", ".join(
                f"{t} ({n})" for t, n in self.stretches.items() if n)
        by_sqlite = [t for t, reader in self.readers.items() if reader != salvage.ROW_BY_ROW]
        if by_sqlite:
            text += f"; read by sqlite3 .recover: {', '.join(by_sqlite)}"
        return text


ROW_NAMES = {"runs": ("run's row", "runs' rows"), "experiments": ("experiment's row", "experiments' rows"),
             "steps": ("step", "steps"), "timeline": ("interval", "intervals"),
             "samples": ("telemetry sample", "telemetry samples"), "profiles": ("profile", "profiles")}


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _rows(n: int, table: str) -> str:
    return _plural(n, *ROW_NAMES.get(table, (table, table)))


_checked: set[Path] = set()             # the paths this process has checked since it started
_notices: dict[Path, list[str]] = {}    # what those checks found to tell the store's user
_checking = threading.Lock()


def check_once(path: Path) -> str | None:
    """A process's first open of a store checks it: a damaged one is set aside (StoreDamaged says where), and a
    log lost with writes in it (``lost_log``) is returned, to be said on the runs it cost (and kept for
    ``notices``). Later opens of the path in this process check nothing and return None."""
    with _checking:
        resolved = path.resolve()
        if resolved in _checked:
            return None
        lost = lost_log(path)   # before SQLite opens it: its first open rebuilds the log's index
        if lost is not None:
            _notices[resolved] = [f"the run store {path}: {lost}"]
        problem = damage(path)
        if problem is None:
            _checked.add(resolved)
            return lost
        # Renamed under a process that has it open, the store would go on in the kept copy for that process,
        # and its last close would delete the log of the fresh store now at the old name.
        holders = other_holders(path)
        if holders:
            raise StoreDamaged(str(path), problem, None, f"processes {', '.join(map(str, holders))} have it open: "
                               "close them, and the next open moves it aside")
        try:
            kept = set_aside(path)
        except OSError as exc:
            raise StoreDamaged(str(path), problem, None, f"it could not be moved: {exc}") from exc
        raise StoreDamaged(str(path), problem, str(kept))


def notices(path: Path) -> list[str]:
    """What this process's check of the store at ``path`` found to tell its user."""
    return list(_notices.get(path.resolve(), []))


def take_notices() -> list[str]:
    """Every notice this process's checks found and nobody took yet (the CLI prints them once)."""
    found = [line for lines in _notices.values() for line in lines if line not in _taken]
    _taken.update(found)
    return found


_taken: set[str] = set()


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
    """Insert into ``target`` (the store's open connection) what can be read of ``source`` (salvage.py), for the
    runs and experiments ``target`` does not have yet. A run whose rows did not all come back, or may not have,
    is marked ``RECOVERED_PARTIAL``, its error saying what came back; one whose row was lost is rebuilt from
    its id. ``source`` is read whole first, so the store's write lock is held for the inserts alone (a run
    recording meanwhile waits that long)."""
    source = Path(source)
    wanted = {table: {r[1]: (r[2].upper(), bool(r[3])) for r in target.execute(f"PRAGMA table_info({table})")}
              for table in TABLES}
    read = salvage.read_damaged(source, wanted)
    target.execute("BEGIN IMMEDIATE")
    try:
        had_runs = {r[0] for r in target.execute("SELECT id FROM runs")}
        had = {"runs": had_runs, "experiments": {r[0] for r in target.execute("SELECT id FROM experiments")}}
        inserted: dict[str, int] = {}
        if "experiments" in read:
            experiments = read["experiments"]
            inserted["experiments"] = _insert(target, experiments, [
                r for r in experiments.rows if r[experiments.columns.index("id")] not in had["experiments"]])
        runs, rebuilt, partial = _run_rows(read, had_runs, source)
        # A run whose experiment was lost keeps its rows, not a reference to nothing.
        known_experiments = {r[0] for r in target.execute("SELECT id FROM experiments")}
        for run in runs:
            if run.get("experiment_id") not in known_experiments:
                run["experiment_id"] = None
        columns = list(wanted["runs"])
        inserted["runs"] = _insert(target, salvage.TableRead("runs", columns),
                                   [tuple(run.get(c) for c in columns) for run in runs])
        new_runs = {run["id"] for run in runs}
        for table in CHILD_TABLES:
            if table in read:
                key = read[table].columns.index("run_id")
                inserted[table] = _insert(target, read[table], [r for r in read[table].rows if r[key] in new_runs])
        target.execute("COMMIT")
    except BaseException:
        target.execute("ROLLBACK")
        raise
    unreadable = {}
    for table, found in read.items():
        counts = found.counts()
        # Rows its index saw that did not come back, else at least those read that could not be what was stored.
        unreadable[table] = max(found.malformed, sum(max(0, n - counts.get(key, 0)) for key, n in found.seen.items()
                                                     if key not in had.get(table, had_runs)))
    return Recovery(str(source), inserted.get("runs", 0), inserted.get("experiments", 0),
                    {t: n for t, n in inserted.items() if t in CHILD_TABLES}, unreadable,
                    {t: found.stretches for t, found in read.items()}, rebuilt, partial,
                    {t: found.reader for t, found in read.items()},
                    "" if inserted.get("runs") else _why_none(source, read, had_runs))


SQLITE_HEADER = b"SQLite format 3\x00"


def _why_none(source: Path, read: dict, had_runs: set) -> str:
    """Why no run came back from ``source``: "recovered 0 runs" alone left the user guessing."""
    try:
        with source.open("rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"it could not be read: {exc.strerror or exc}"
    if not head:
        return "the file is empty"
    if head != SQLITE_HEADER:
        return "the file is not an SQLite database: its first bytes are not SQLite's header"
    if not read:
        return "none of its tables could be read: the pages that describe them are lost"
    found = {row[read["runs"].columns.index("id")] for row in read["runs"].rows} if "runs" in read else set()
    if found and found <= had_runs:
        return f"its {_plural(len(found), 'run', 'runs')} are in this store already"
    return "no run's row or step could be read"


def _insert(target: sqlite3.Connection, table: salvage.TableRead, rows: list[tuple]) -> int:
    """Rows that break a constraint (a NOT NULL value that could not be read) are left out."""
    before = target.total_changes
    target.executemany(f"INSERT OR IGNORE INTO {table.table} ({', '.join(table.columns)}) "
                       f"VALUES ({', '.join('?' * len(table.columns))})", rows)
    return target.total_changes - before


def _run_rows(read: dict[str, salvage.TableRead], had_runs: set[str], source: Path) -> tuple[list[dict], int, int]:
    """The runs' rows to insert: those read, and one rebuilt from its id for each run whose rows of other tables
    came back without its own; each marked ``RECOVERED_PARTIAL`` where it is known or possible that some of its
    rows were lost. Returns them, how many were rebuilt, and how many are partial."""
    runs_read = read.get("runs") or salvage.TableRead("runs", ["id"])
    found = {r["id"]: r for r in (dict(zip(runs_read.columns, row, strict=False)) for row in runs_read.rows)
             if r["id"] not in had_runs}
    children = {t: read[t] for t in CHILD_TABLES if t in read}
    counts = {t: found_rows.counts() for t, found_rows in children.items()}
    ids = set(found) | {run_id for by_run in counts.values() for run_id in by_run if run_id not in had_runs}
    rows, rebuilt, partial = [], 0, 0
    for run_id in sorted(ids):
        run = found.get(run_id) or {"id": run_id}
        why = []
        if run_id not in found:
            why.append("its own row was lost, so its settings are unknown (rebuilt from its id)")
            rebuilt += 1
        elif run_id in runs_read.partly_read:
            why.append("part of its own row could not be read and is left empty")
        came_back, short, maybe_short = [], False, False
        for table, found_rows in children.items():
            got, seen = counts[table].get(run_id, 0), found_rows.seen.get(run_id)
            if table == "profiles" and not got and not seen:
                continue
            came_back.append(f"{got:,}{f' of {seen:,}' if seen is not None and seen > got else ''} "
                             f"{ROW_NAMES[table][got != 1]}")
            lossy = bool(found_rows.stretches or found_rows.partly_read or found_rows.malformed)
            short |= (seen is not None and seen > got) or run_id in found_rows.partly_read
            maybe_short |= lossy and seen is None and not found_rows.seen_whole
        if why or short or maybe_short:
            note = f"{RECOVERED_PARTIAL} from {source}: {', '.join(came_back)} came back"
            if maybe_short:
                note += " (more may have been lost: SQLite could not tell whose unreadable rows were)"
            was = [f"it was {run['status']}"] if run.get("status") else []
            run["error"] = "; ".join([note, *why, *was, *filter(None, [run.get("error")])])
            run["status"] = RECOVERED_PARTIAL
            partial += 1
        run.setdefault("ended", None)
        for column, default in (("started", _started(run_id)), ("config", "{}"), ("status", RECOVERED_PARTIAL)):
            if run.get(column) is None:
                run[column] = default
        rows.append(run)
    return rows, rebuilt, partial


def _started(run_id: str) -> float:
    """When a run began, from its id (``Store.create_run``: its local time to the second), else 0."""
    try:
        return time.mktime(time.strptime(run_id[:15], "%Y%m%d-%H%M%S"))
    except (ValueError, OverflowError):
        return 0.0


# The wal-index header (SQLite's wal.c, WalIndexHdr), in the machine's byte order: version, unused, change counter,
# isInit, bigEndCksum, page size, mxFrame (frames in the log), nPage. Two copies, then WalCkptInfo.
WAL_HEADER = struct.Struct("=IIIBBHII")
WAL_INDEX_VERSION = 3007000
WAL_FRAME_HEADER, WAL_FILE_HEADER = 24, 32
BACKFILL_AT = 96                          # WalCkptInfo.nBackfill, after the header's two 48-byte copies


def lost_log(path: Path) -> str | None:
    """What a deleted (or cut) write-ahead log lost, found before SQLite first opens the store (which rebuilds the
    log's index): the index (``-shm``), left by a process that did not close the store, says the log held
    committed pages not yet copied into the store (``mxFrame`` above ``nBackfill``), and the log is missing or
    shorter than those pages. None when nothing was lost, or it cannot be told (both files gone: a clean close
    removes both, so nothing is left to compare)."""
    log, index = Path(f"{path}{SIDECARS[0]}"), Path(f"{path}{SIDECARS[1]}")
    try:
        with open(index, "rb") as f:
            header = f.read(BACKFILL_AT + 4)
    except OSError:
        return None
    if len(header) < BACKFILL_AT + 4 or header[:48] != header[48:96]:
        return None   # no index, or one being written
    version, _, _, initialised, _, page, frames, _ = WAL_HEADER.unpack_from(header)
    backfilled = struct.unpack_from("=I", header, BACKFILL_AT)[0]
    if version != WAL_INDEX_VERSION or not initialised or frames <= backfilled:
        return None
    page_size = 65536 if page == 1 else page
    needed = WAL_FILE_HEADER + frames * (WAL_FRAME_HEADER + page_size)
    try:
        size = log.stat().st_size
    except FileNotFoundError:
        size = None
    if size is not None and size >= needed:
        return None
    state = "is missing" if size is None else f"is cut short ({size:,} of {needed:,} bytes)"
    return (f"its write-ahead log {log} {state}, yet its index {index} says the log held {frames - backfilled:,} "
            "committed pages not yet written into the store: what was recorded last before the store was left "
            "open (a run's last steps, or whole runs) is lost")
