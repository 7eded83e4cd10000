"""Where the run store lives, and whether a store can be made or written there (docs/store.md).

``default_path()`` is ``SPLITSCOPE_DB``, else ``splitscope.sqlite3`` in the user data folder, the one place
whose missing folders are made: a path the user gave names a folder that must exist (a typo must not make
folders anywhere, even at ``/``). ``location_problem`` says why a path cannot hold a store before anything
opens it; ``read_only_reason`` why a store there can be read but not written, and ``connect_read_only`` reads
it then.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from engine.environment import variable

# What is added to the store's file name beside it: SQLite's "-wal" and "-shm", and the name a damaged store is
# set aside under (repair.set_aside: ".damaged-20261207-001327-9" before the suffix, then "-wal").
NAME_ROOM = len(".damaged-YYYYmmdd-HHMMSS-99") + len("-wal")
NAME_MAX, PATH_MAX = 255, 4096   # Linux's, where the file system does not say


class StoreLocationError(sqlite3.OperationalError):
    """The store's path cannot hold a store: a name too long, a folder missing (``location_problem``)."""


def data_path() -> Path:
    """The store in the user data folder (without platformdirs, on an engine-only machine: XDG's location)."""
    try:
        import platformdirs
    except ImportError:
        base = Path(variable("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        return base / "splitscope" / "splitscope.sqlite3"
    return Path(platformdirs.user_data_dir("splitscope", appauthor=False)) / "splitscope.sqlite3"


def default_path() -> Path:
    env = variable("SPLITSCOPE_DB")
    return Path(env) if env else data_path()


def makes_folders(path: Path) -> bool:
    """Whether a store at ``path`` may have its missing folders made: only the user data folder's."""
    return os.path.abspath(path) == os.path.abspath(data_path())


def _limit(path: Path, name: str, default: int) -> int:
    """The file system's limit ``name`` (pathconf) where ``path`` would be, from its nearest existing folder."""
    folder = Path(os.path.abspath(path)).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return os.pathconf(folder, name)
    except (OSError, ValueError):
        return default


def location_problem(path: Path) -> str | None:
    """Why no store can be at ``path`` (checked before anything opens it), or None."""
    name_max = _limit(path, "PC_NAME_MAX", NAME_MAX)
    name = len(os.fsencode(path.name))
    if name > name_max - NAME_ROOM:
        return (f"the store's file name is {name} bytes long; at most {name_max - NAME_ROOM} (the file system "
                f"allows {name_max}, less {NAME_ROOM} for the names SQLite's log and a damaged copy add to it)")
    long_folder = next((part for part in Path(os.path.abspath(path)).parent.parts
                        if len(os.fsencode(part)) > name_max), None)
    if long_folder is not None:
        return f"a folder name in its path is {len(os.fsencode(long_folder))} bytes long; at most {name_max}"
    path_max = _limit(path, "PC_PATH_MAX", PATH_MAX)
    whole = len(os.fsencode(os.path.abspath(path))) + NAME_ROOM
    if whole > path_max:
        return f"its path is too long: {whole - NAME_ROOM} bytes; at most {path_max - NAME_ROOM}"
    if makes_folders(path):
        return None
    folder = Path(os.path.abspath(path)).parent
    if not folder.exists():
        return f"there is no folder {folder} (folders are made only for the default store: make it first)"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if path.is_dir():
        return "it is a folder, not a file"
    return None


def read_only_reason(path: Path) -> str | None:
    """Why a store at ``path`` can be read but not written (this process's permissions, a read-only file
    system), or None. A folder that cannot be written matters only while the store has no log beside it:
    SQLite makes its ``-wal`` there to write."""
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    folder = Path(os.path.abspath(path)).parent
    if folder.is_dir() and not os.access(folder, os.W_OK) and not Path(f"{path}-wal").exists():
        return f"its folder {folder} is not writable"
    return None


def connect_read_only(path: Path, timeout_s: float) -> sqlite3.Connection:
    """A connection that only reads the store at ``path`` (SQLite's ``mode=ro``)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        db.close()
        if Path(f"{path}-wal").exists():
            raise
        # A WAL store with no log, in a folder where SQLite cannot make the log's index: nothing unwritten
        # exists, so the file is read as it stands.
        db = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)
    return db
