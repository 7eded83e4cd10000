"""The run store on the command line: ``recover``, and the one line any command prints when the store fails."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from engine.store.client import open_store
from engine.store.database import default_path
from engine.store.repair import StoreDamaged

EXIT_OK, EXIT_INVALID = 0, 2   # engine/cli.py's


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
    with open_store(args.db) as store:
        if store.path.resolve() == kept.resolve():
            print(f"error: recover: {kept} is the run store itself; name the damaged copy set aside beside it",
                  file=sys.stderr)
            return EXIT_INVALID
        recovery = store.recover_from(kept)
        print(f"{recovery.describe()}, into {store.path}")
    return EXIT_OK


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
