"""The run store on the command line: ``recover``; the checks of ``--db`` every command that names a store makes
before it opens one; opening a store to read one that cannot be written; and the one line any command prints
when the store fails."""
from __future__ import annotations

import math
import sqlite3
import sys
from pathlib import Path

from engine.environment import variable
from engine.store.client import open_store
from engine.store.database import Store, default_path
from engine.store.location import location_problem, read_only_reason
from engine.store.repair import StoreDamaged, take_notices

EXIT_OK, EXIT_INVALID = 0, 2   # engine/cli/'s
READING_COMMANDS = ("runs", "export", "what-if")   # the commands that only read the store


def add_recover_command(sub) -> None:
    recover = sub.add_parser("recover", help="copy what can be read of a damaged run store (set aside when it was "
                                             "found) into the run store")
    recover.add_argument("kept", help="the damaged store's path, as the message that set it aside gave it")
    recover.add_argument("--db", default=None, help="the store to copy into (default: the run store)")


def cmd_recover(args) -> int:
    kept = Path(args.kept)
    if not kept.is_file():
        print(f"error: recover: no file {kept}", file=sys.stderr)
        return EXIT_INVALID
    read_only = read_only_problem(args.db, "nothing can be recovered into it")
    if read_only:
        print(f"error: {read_only}", file=sys.stderr)
        return EXIT_INVALID
    with open_store(args.db) as store:
        if store.path.resolve() == kept.resolve():
            print(f"error: recover: {kept} is the run store itself; name the damaged copy set aside beside it",
                  file=sys.stderr)
            return EXIT_INVALID
        recovery = store.recover_from(kept)
        print(f"{recovery.describe()}, into {store.path}")
    return EXIT_OK


def option_for(db: str | None) -> str:
    """How the user named the store: ``--db``, else ``SPLITSCOPE_DB``, else the default's own words."""
    if db is not None:
        return "--db"
    return "SPLITSCOPE_DB" if variable("SPLITSCOPE_DB") else "the default run store"


def location_error(db: str | None, command: str) -> str | None:
    """One line naming the option, if no store can be at the path it gives (location.location_problem)."""
    path = Path(db) if db is not None else default_path()
    try:
        problem = location_problem(path)
    except (OSError, ValueError) as exc:   # a name the OS refuses outright (a NUL byte)
        problem = str(exc)
    if problem is None:
        return None
    verb = "read" if command in READING_COMMANDS else "write"
    return f"{option_for(db)}: cannot {verb} the run store at {path}: {problem}"


def read_only_problem(db: str | None, what_fails: str) -> str | None:
    """One line for a command that writes, if the store can be read but not written."""
    path = Path(db) if db is not None else default_path()
    why = read_only_reason(path)
    return f"{option_for(db)}: the run store {path} is read-only ({why}): {what_fails}" if why else None


def open_for_reading(db: str | None) -> Store:
    """The store, opened to read only where it cannot be written, which one line on stderr says."""
    path = Path(db) if db is not None else default_path()
    why = read_only_reason(path) if path.exists() else None
    if why is None:
        return open_store(db)
    print(f"note: the run store {path} is read-only ({why}): opened to read it, nothing written",
          file=sys.stderr)
    return Store(db, read_only=True)


def finite(value):
    """``value`` with every float that JSON cannot hold (inf, nan: a store written before ``--lr`` was checked
    may hold them) made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def store_notices() -> None:
    """Print what this process's opens of the store found lost (repair.lost_log), each once."""
    for notice in take_notices():
        print(f"warning: {notice}", file=sys.stderr)


def store_problem(exc: sqlite3.Error, db: str | None) -> str:
    """One line: what is wrong with the run store, what was done, and what the user can do."""
    if isinstance(exc, StoreDamaged):
        if exc.kept_at is None:
            return str(exc)
        into = f" --db {db}" if db else ""
        return f"{exc}; to copy what can be read back into it: python main.py recover {exc.kept_at}{into}"
    if "run store" in str(exc):   # a run's own words name the store already
        return str(exc)
    return f"the run store {db or default_path()}: {exc}"

