"""Reading what SQLite can still read of a damaged store, table by table and row by row (engine/store/repair.py
copies it into the store).

Two readers, and for each table the one that got more rows:

- **Row by row** (always): the kept file opened read-only with ``PRAGMA writable_schema=ON``, under which SQLite
  opens a file shorter than its header says (a store cut short) instead of calling the whole file malformed. Each
  table is read in rowid order; where a read fails, the next rowid is found through the table's b-tree and tried
  alone, and where the b-tree itself is unreadable the next readable rowid is searched for and each one short of
  it tried alone. A run's own row whose end is unreadable (a long value on a lost overflow page) keeps the
  columns that can be read; a row whose values cannot be what was stored (a page cut in half reads as zeros
  and fragments) is dropped. The table's index on its run (or id) is walked as well: it says how many rows
  each run had, so rows seen but unreadable are counted run by run, and the rowids of rows the table's b-tree
  no longer reaches, each then tried alone.
- **``sqlite3 .recover``** (when the ``sqlite3`` command is on PATH and has it): SQLite's own recovery reads
  every page, including those no table reaches any more. Its SQL is loaded into a scratch database in a
  temporary folder and read back. A build without it (no ``sqlite_dbpage``, as Debian's) gives no rows, and
  the row-by-row read stands.

The kept file is only read: a read-only connection, and ``sqlite3 -readonly``. A file that ends partway
through a page is read twice, the second time from a copy whose missing bytes are not zeros, and only the rows
read the same both times are kept (``_page_copies``); SQLite's recovery reads a copy of its whole pages.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

READ_CHUNK = 500
GAP_PROBES = 5000   # rowids tried one by one across an unreadable stretch (about 20 us each)
ROW_BY_ROW = "row by row"
MAX_ROWID = 2 ** 62
RECOVER_TIMEOUT_S = 900.0   # SQLite's recovery of a store of a few GB; past it, the row-by-row read stands
KEYS = {"experiments": "id", "runs": "id"}   # every other table's rows belong to a run: run_id


def key_of(table: str) -> str:
    return KEYS.get(table, "run_id")


@dataclass
class TableRead:
    """What one reader got of one table."""
    table: str
    columns: list[str]
    by_rowid: dict = field(default_factory=dict)      # rowid -> row, in ``columns``; None where a partly read
                                                      # row's value was lost
    stretches: int = 0                                # unreadable stretches stepped over
    partly_read: set = field(default_factory=set)     # keys of rows kept without the columns that could not be read
    malformed: int = 0                                # rows read that cannot be what was stored: dropped
    seen: dict = field(default_factory=dict)          # key -> rows the table's index has for it
    seen_whole: bool = False                          # the index was read to its end: ``seen`` covers every key
    reader: str = ROW_BY_ROW

    @property
    def rows(self) -> list[tuple]:
        return list(self.by_rowid.values())

    def counts(self) -> dict:
        """key -> rows read."""
        k = self.columns.index(key_of(self.table))
        found: dict = {}
        for row in self.by_rowid.values():
            found[row[k]] = found.get(row[k], 0) + 1
        return found


Columns = dict[str, tuple[str, bool]]   # name -> (declared type, NOT NULL), as the store's table has them


def read_damaged(source: Path, wanted: dict[str, Columns]) -> dict[str, TableRead]:
    """Each table of ``wanted`` that ``source`` has, in the columns both have, read by both readers; the better
    read of each."""
    source = Path(source)
    rows_read = _read_row_by_row(source, wanted)
    with _page_copies(source) as (whole_pages, filled):
        if filled is not None:
            _keep_agreeing(rows_read, filled, wanted)
        recovered = _read_with_sqlite_recover(whole_pages or source, wanted)
    best = {}
    for table, ours in rows_read.items():
        theirs = recovered.get(table)
        if theirs is not None and len(theirs.by_rowid) > len(ours.by_rowid):
            # The index counts and the stretches are the kept file's, whichever reader's rows are used.
            theirs.seen, theirs.seen_whole = ours.seen, ours.seen_whole
            theirs.stretches, theirs.malformed = ours.stretches, ours.malformed
            best[table] = theirs
        else:
            best[table] = ours
    for table, theirs in recovered.items():
        best.setdefault(table, theirs)   # a table whose schema entry only SQLite's recovery found
    return best


@contextlib.contextmanager
def _page_copies(source: Path):
    """(None, None), or where ``source`` ends partway through a page (``truncate -s HALF``), two copies in a
    temporary folder, each with its log: its whole pages alone, and the same with its last page completed with
    0x01 bytes. SQLite reads the missing end of a page as zeros, and a row cut there reads back as one that was
    never stored (a float's last bytes zeroed) that nothing tells from a real one; a row that reads the same
    whatever fills the missing bytes lies wholly in the bytes that are there. (0x01, not 0xFF: cells of ones
    parse as short rows with rowid 1, in order, where 0xFF makes SQLite call the whole page malformed.)"""
    try:
        with open(source, "rb") as f:
            header = f.read(100)
        size = source.stat().st_size
    except OSError:
        header, size = b"", 0
    page = int.from_bytes(header[16:18], "big") if header.startswith(b"SQLite format 3\x00") else 0
    page = 65536 if page == 1 else page
    if not page or size % page == 0:
        yield None, None
        return
    with tempfile.TemporaryDirectory(prefix="splitscope-recover-") as folder:
        copies = Path(folder) / f"whole-{source.name}", Path(folder) / f"filled-{source.name}"
        for copy in copies:
            shutil.copyfile(source, copy)
            if Path(f"{source}-wal").exists():
                shutil.copyfile(f"{source}-wal", f"{copy}-wal")
        os.truncate(copies[0], size - size % page)
        with open(copies[1], "ab") as f:
            f.write(b"\x01" * (page - size % page))
        yield copies


def _keep_agreeing(reads: dict[str, TableRead], other: Path, wanted: dict[str, Columns]) -> None:
    """Keep in ``reads`` the rows that read the same at the same rowid in ``other``; the rest count as
    malformed. ``other`` is read whole first, then each row not found so is asked for alone (its damaged page
    may have led that read astray)."""
    others = _read_row_by_row(other, wanted)
    db = open_damaged(other)
    try:
        for table, read in reads.items():
            columns = {c: wanted[table][c] for c in read.columns}
            theirs = others[table].by_rowid if table in others else {}
            agreeing = {}
            for rowid, row in read.by_rowid.items():
                if theirs.get(rowid) == row or _row_at(db, table, columns, rowid) == row:
                    agreeing[rowid] = row
            read.malformed += len(read.by_rowid) - len(agreeing)
            read.by_rowid = agreeing
    finally:
        db.close()


def _row_at(db: sqlite3.Connection, table: str, columns: Columns, rowid: int) -> tuple | None:
    """The row ``rowid`` whole, else what of it reads column by column, else None."""
    try:
        return db.execute(f"SELECT {', '.join(columns)} FROM \"{table}\" WHERE rowid = ?", (rowid,)).fetchone()
    except sqlite3.DatabaseError:
        return _partial_row(db, table, columns, rowid)


def open_damaged(source: Path) -> sqlite3.Connection:
    """``source`` read-only, with the schema's checks relaxed so that a file cut short still opens."""
    db = sqlite3.connect(f"{Path(source).resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
    db.execute("PRAGMA writable_schema=ON")
    return db


def _read_row_by_row(source: Path, wanted: dict[str, Columns]) -> dict[str, TableRead]:
    try:
        db = open_damaged(source)
    except sqlite3.DatabaseError:   # not a database at all (its first page gone): SQLite's recovery may read it
        return {}
    try:
        tables = {r[0] for r in _rows(db, "SELECT name FROM sqlite_master WHERE type='table'")}
        read = {}
        for table, columns in wanted.items():
            shared = _shared(db, table, columns) if table in tables else {}
            if key_of(table) not in shared:
                continue
            found = read[table] = _readable(db, table, shared)
            rowids, found.seen_whole = _index_rowids(db, table, key_of(table))
            found.seen = {key: len(ids) for key, ids in rowids.items()}
            for rowid in sorted(r for ids in rowids.values() for r in ids if r not in found.by_rowid):
                _probe(db, found, shared, rowid)   # a row its index knows that the table's b-tree did not reach
        return read
    finally:
        db.close()


def _shared(db: sqlite3.Connection, table: str, columns: Columns) -> Columns:
    """The columns of ``columns`` that ``db``'s table has (an older store lacks the newer ones)."""
    theirs = {r[1] for r in _rows(db, f'PRAGMA table_info("{table}")')}
    return {name: spec for name, spec in columns.items() if name in theirs}


def _fits(row: tuple, columns: Columns, lacking_allowed: bool = False) -> bool:
    """Whether a row read can be what was stored: each value of its column's type, text without NUL, NOT NULL
    columns filled (unless ``lacking_allowed``: a run's own row read in part, which repair.py fills in). A page
    cut in half reads as rows of zeros and fragments, which SQLite does not always call malformed."""
    for value, (declared, not_null) in zip(row, columns.values(), strict=False):
        if value is None:
            if not_null and not lacking_allowed:
                return False
        elif (declared == "INTEGER" and type(value) is not int
              or declared == "REAL" and type(value) not in (int, float)
              or declared == "TEXT" and (type(value) is not str or "\x00" in value)):
            return False
    return True


def _rows(db: sqlite3.Connection, sql: str, args=()) -> list[tuple]:
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.DatabaseError:
        return []


def _readable(db: sqlite3.Connection, table: str, columns: Columns) -> TableRead:
    """Every row SQLite can read, in rowid order. A read that fails keeps the rows before it; the row it failed
    on is the next rowid, found through the table's b-tree alone, and kept with what of it can be read; where
    even the rowids cannot be read (a damaged or lost interior page), the next readable one is searched for
    (doubling the step, then halving back) and each rowid short of it is tried alone, so a readable page
    between unreadable ones is not jumped over. A lost leaf page costs the rows on it."""
    select = (f"SELECT rowid, {', '.join(columns)} FROM \"{table}\" WHERE rowid > ? ORDER BY rowid "
              f"LIMIT {READ_CHUNK}")
    read = TableRead(table, list(columns))
    after, failing = -MAX_ROWID, False
    while True:
        start, chunk, out_of_order = after, 0, False
        try:
            for row in db.execute(select, (after,)):
                if row[0] <= after:   # a damaged b-tree goes back: read no further along it
                    out_of_order = True
                    break
                _keep(read, columns, row[0], row[1:])
                after, chunk = row[0], chunk + 1
            if not out_of_order:
                if chunk < READ_CHUNK:
                    return read
                failing = False
                continue
        except sqlite3.DatabaseError:
            pass
        if after > start or not failing:
            read.stretches, failing = read.stretches + 1, True   # a new stretch of unreadable rows
        bad = _next_rowid(db, table, after)
        if bad is not None and bad > after:
            _probe(db, read, columns, bad)
            after = bad
            continue
        resume = _next_readable(db, table, max(after, 0))
        if resume is None:
            return read
        if resume - after <= GAP_PROBES:
            for rowid in range(after + 1, resume):
                _probe(db, read, columns, rowid)
        after = max(resume - 1, after + 1)    # read from there: it may be readable


def _keep(read: TableRead, columns: Columns, rowid: int, row: tuple, partial: bool = False) -> None:
    if rowid in read.by_rowid:
        return
    if not _fits(row, columns, lacking_allowed=partial and read.table == "runs"):
        read.malformed += 1
        return
    read.by_rowid[rowid] = row
    if partial:
        read.partly_read.add(row[read.columns.index(key_of(read.table))])


def _probe(db: sqlite3.Connection, read: TableRead, columns: Columns, rowid: int) -> None:
    """Keep the row ``rowid`` if it reads whole, else what of it reads column by column, if anything."""
    try:
        row = db.execute(f"SELECT {', '.join(columns)} FROM \"{read.table}\" WHERE rowid = ?", (rowid,)).fetchone()
        partial = False
    except sqlite3.DatabaseError:
        row, partial = _partial_row(db, read.table, columns, rowid), True
    if row is not None:
        _keep(read, columns, rowid, row, partial=partial)


def _partial_row(db: sqlite3.Connection, table: str, columns: Columns, rowid: int) -> tuple | None:
    """The row's columns that can be read one at a time (None for the others), if its key is among them. Only
    a run's own row is kept without a NOT NULL value (repair.py fills it in): another table's such row is of
    no use, and ``_keep`` drops it."""
    values = []
    for column in columns:
        found = _rows(db, f'SELECT "{column}" FROM "{table}" WHERE rowid = ?', (rowid,))
        values.append(found[0][0] if found else None)
    return tuple(values) if values[list(columns).index(key_of(table))] is not None else None


def _next_rowid(db: sqlite3.Connection, table: str, after: int) -> int | None:
    """The next rowid after ``after`` as the table's b-tree says it (None: none, or the b-tree is unreadable
    there, which ``_next_readable`` then steps over)."""
    try:
        row = db.execute(f'SELECT rowid FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT 1', (after,)).fetchone()
    except sqlite3.DatabaseError:
        return None
    return row[0] if row else None


def _next_readable(db: sqlite3.Connection, table: str, after: int) -> int | None:
    """The smallest rowid above ``after`` from which the b-tree reads again, roughly (None: nothing readable)."""
    def reads_from(rowid: int) -> bool:
        try:
            db.execute(f'SELECT rowid FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT 1', (rowid,)).fetchall()
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


def _index_rowids(db: sqlite3.Connection, table: str, key: str) -> tuple[dict, bool]:
    """The rowids of each key's rows, as the table's index on ``key`` says (its pages may outlive the table's),
    and whether every key's were read. Each key is found by a seek of its own past the last, so a damaged page
    costs the keys on it alone."""
    index = next((name for _, name, *_ in _rows(db, f'PRAGMA index_list("{table}")')
                  if [r[2] for r in _rows(db, f'PRAGMA index_info("{name}")')][:1] == [key]), None)
    if index is None:
        return {}, False
    within = f'"{table}" INDEXED BY "{index}"'
    rowids, whole, after = {}, True, None
    while True:   # each key once: a damaged index that leads back to one already read ends the walk
        try:
            row = (db.execute(f"SELECT {key} FROM {within} WHERE {key} IS NOT NULL ORDER BY {key} LIMIT 1")
                   if after is None else
                   db.execute(f"SELECT {key} FROM {within} WHERE {key} > ? ORDER BY {key} LIMIT 1", (after,))
                   ).fetchone()
        except sqlite3.DatabaseError:
            return rowids, False   # the keys after a damaged page cannot be found from here
        if row is None:
            return rowids, whole
        if row[0] in rowids:
            return rowids, False
        after = row[0]
        try:
            rowids[after] = [r[0] for r in db.execute(f"SELECT rowid FROM {within} WHERE {key} = ?", (after,))]
        except sqlite3.DatabaseError:
            whole = False


def _read_with_sqlite_recover(source: Path, wanted: dict[str, Columns]) -> dict[str, TableRead]:
    """The tables as ``sqlite3 -readonly SOURCE .recover`` gives them ({} without the command, or where it fails)."""
    command = shutil.which("sqlite3")
    if command is None:
        return {}
    with tempfile.TemporaryDirectory(prefix="splitscope-recover-") as scratch_dir:
        scratch = sqlite3.connect(Path(scratch_dir) / "recovered.sqlite3", isolation_level=None)
        try:
            scratch.execute("PRAGMA journal_mode=OFF")   # a scratch copy: nothing to keep if it fails
            scratch.execute("PRAGMA synchronous=OFF")
            if not _load_recovered(command, source, scratch):
                return {}
            read = {}
            for table, columns in wanted.items():
                shared = _shared(scratch, table, columns)
                if key_of(table) in shared:
                    read[table] = _readable(scratch, table, shared)
                    read[table].reader, read[table].stretches = "sqlite3 .recover", 0
            return read
        finally:
            scratch.close()


def _load_recovered(command: str, source: Path, scratch: sqlite3.Connection) -> bool:
    """Run ``.recover`` and execute its SQL in ``scratch``, statement by statement (one that fails is skipped:
    the rest still load). False if it gave nothing or could not run."""
    try:
        proc = subprocess.Popen([command, "-readonly", str(source), ".recover"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, errors="replace")
    except OSError:
        return False
    timer = _Deadline(proc, RECOVER_TIMEOUT_S)
    statement, loaded = "", 0
    try:
        for line in proc.stdout:
            statement += line
            if not sqlite3.complete_statement(statement):
                continue
            try:
                scratch.execute(statement)
                loaded += 1
            except sqlite3.Error:
                pass
            statement = ""
    finally:
        proc.stdout.close()
        proc.wait()
        timer.cancel()
    if scratch.in_transaction:
        scratch.execute("COMMIT")   # a recovery cut short: what it gave is still read
    return loaded > 0 and not timer.expired


class _Deadline:
    """Kill ``proc`` after ``seconds``: a recovery that never ends must not hold the store's Recover for ever."""

    def __init__(self, proc: subprocess.Popen, seconds: float):
        self.expired = False
        self._proc = proc
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        self.expired = True
        self._proc.kill()

    def cancel(self) -> None:
        self._timer.cancel()
