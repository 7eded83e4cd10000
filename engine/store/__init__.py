"""The run store (docs/store.md): runs, experiments, their steps, timelines, telemetry and profiles in SQLite.

- ``database.py``: ``Store``, one SQLite connection, and the records it reads back;
- ``schema.py``: the tables, the columns added since, the SQL that buckets samples;
- ``locking.py``: how long a write waits for another's, retrying what SQLite says is busy, the write transaction;
- ``client.py``: ``open_store``, which every caller uses: a ``Store`` here, or a ``RemoteStore`` in the store
  process for a process that opens files it does not choose (the app);
- ``server.py``: the store process (``python -m engine.store``, ``__main__.py``);
- ``repair.py``: a damaged store found on first open, set aside whole, what can be read of it recovered; a
  deleted log found;
- ``salvage.py``: reading a damaged store row by row, and with ``sqlite3 .recover``;
- ``location.py``: the default path, and whether a path can hold a store, or only be read;
- ``command.py``: ``recover`` and the store's checks and messages on the command line.
"""
from engine.store.client import (
    RemoteStore,
    StoreUnavailable,
    open_store,
    serve_from_child,
    start_store_process,
    store_process_pid,
)
from engine.store.database import STATUSES, ExperimentRecord, RunRecord, Store, default_path
from engine.store.location import StoreLocationError
from engine.store.repair import Recovery, StoreDamaged

__all__ = ["STATUSES", "ExperimentRecord", "Recovery", "RemoteStore", "RunRecord", "Store", "StoreDamaged",
           "StoreLocationError", "StoreUnavailable", "default_path", "open_store", "serve_from_child",
           "start_store_process", "store_process_pid"]
