"""The run store: SQLite in the user data dir, WAL mode (docs/store.md).

A run row (id, started, status, config, summary) with its steps, timeline and
telemetry samples; experiments group runs. ``--db PATH`` or ``SPLITSCOPE_DB``
overrides the location (location.py). Runs found ``running`` whose owning process is gone are
marked ``interrupted`` when a store is opened. A process's first open of a path
checks it (``repair.check_once``) and sets a damaged store aside before using it.
A store that cannot be written can still be opened to read (``read_only``).
"""
from __future__ import annotations

import gzip
import json
import math
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import ExperimentConfig
from engine.results import ExperimentPlan, ExperimentResult, RunSummary, Sample, Step, from_json, to_json
from engine.store import repair
from engine.store.location import StoreLocationError, connect_read_only, default_path, location_problem, makes_folders
from engine.store.locking import BUSY_TIMEOUT_S, Transaction, until_unlocked
from engine.store.schema import AGGREGATES, SAMPLE_FIELDS, SCHEMA, STATUSES, bucket_start, migrate  # noqa: F401


def _shares(busy: dict | None) -> str | None:
    """Busy shares as stored: 6 decimals (a microsecond of a second-long step) keep the summary's figures."""
    return None if busy is None else json.dumps({d: round(v, 6) for d, v in busy.items()}, separators=(",", ":"))


@dataclass(frozen=True)
class RunRecord:
    id: str
    started: float
    ended: float | None
    status: str
    config: ExperimentConfig        # as stored; what this version cannot read takes its default
    summary: RunSummary | None
    error: str | None
    traceback: str | None
    experiment_id: str | None
    label: str | None

    def to_dict(self) -> dict:
        return {**self.__dict__, "config": self.config.to_dict(), "summary": to_json(self.summary)}


@dataclass(frozen=True)
class ExperimentRecord:
    id: str
    name: str
    created: float
    plan: ExperimentPlan               # the base, repeats and planned points (the table's params)
    result: ExperimentResult | None    # None until it finished


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Store:
    """One connection to the run store. Use from one thread.

    A process holding one must never open the store's files otherwise (docs/store.md, "One rule"): the
    app keeps its connections in a process of their own (``engine.store.client``)."""

    def __init__(self, path: str | os.PathLike | None = None, owner_pid: int | None = None,
                 read_only: bool = False):
        """``owner_pid``: the process its runs are recorded for (the store process passes the app's).
        ``read_only``: open to read a store that cannot be written (location.read_only_reason): nothing is set
        up or marked, and every write fails."""
        self.path = Path(path) if path is not None else default_path()
        self.owner_pid = owner_pid or os.getpid()
        self.read_only = read_only
        if makes_folders(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        problem = location_problem(self.path)
        if problem is not None:
            raise StoreLocationError(f"the run store {self.path}: {problem}")
        lost = repair.check_once(self.path)
        until_unlocked(self._open_read_only if read_only else lambda: self._open(lost))

    def _open(self, lost: str | None = None) -> None:
        """Connect and set the store up (schema, migrations, runs of dead owners marked): ``self._db``. ``lost``:
        what this process's first check found lost (repair.lost_log), said on the runs it marks."""
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(SCHEMA)
            self._db = db
            migrate(self._db)
            self.mark_interrupted(f"its last steps may be lost: {lost}" if lost else None)
        except BaseException:
            db.close()
            raise

    def _open_read_only(self) -> None:
        self._db = connect_read_only(self.path, BUSY_TIMEOUT_S)
        self._db.row_factory = sqlite3.Row

    def notices(self) -> list[str]:
        """What this process's first open of the store found to tell its user (a lost log: repair.lost_log)."""
        return repair.notices(self.path)

    # ---- lifecycle ----------------------------------------------------------
    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _tx(self):
        return Transaction(self._db)

    def mark_interrupted(self, note: str | None = None) -> int:
        """Runs left ``running`` by a process that is gone become ``interrupted``; ``note`` is added to their
        error."""
        host = socket.gethostname()
        rows = self._db.execute("SELECT id, owner_pid, owner_host FROM runs WHERE status='running'").fetchall()
        dead = [r["id"] for r in rows
                if r["owner_host"] == host and r["owner_pid"] not in (os.getpid(), self.owner_pid)
                and not _pid_alive(r["owner_pid"])]
        with self._tx():
            for run_id in dead:
                self._db.execute("UPDATE runs SET status='interrupted', ended=?1, "
                                 "error=COALESCE(error || '; ' || ?2, error, ?2) WHERE id=?3",
                                 (time.time(), note, run_id))
        return len(dead)

    # ---- writing ----------------------------------------------------------
    def create_run(self, config: dict, *, experiment_id: str | None = None, label: str | None = None) -> str:
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        with self._tx():
            self._db.execute(
                "INSERT INTO runs (id, started, status, config, experiment_id, label, owner_pid, owner_host) "
                "VALUES (?, ?, 'running', ?, ?, ?, ?, ?)",
                (run_id, time.time(), json.dumps(config, sort_keys=True), experiment_id, label,
                 self.owner_pid, socket.gethostname()))
        return run_id

    def add_steps(self, run_id: str, steps: Iterable[Step], kept_steps: Collection[int] | None = None) -> None:
        """Store merged steps: every step's row, and the intervals of those in ``kept_steps`` (default: every
        step's)."""
        steps = list(steps)
        if not steps:
            return
        with self._tx():
            self._db.executemany(
                "INSERT OR REPLACE INTO steps (run_id, step, t, time_s, samples, throughput, loss, batch_split, busy, "
                "tensor_mem) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, s.step, s.t, s.time_s, s.samples, s.throughput, s.loss,
                  json.dumps(s.batch_split) if s.batch_split is not None else None,
                  _shares(s.busy), json.dumps(s.tensor_memory) if s.tensor_memory else None)
                 for s in steps])
            self._insert_timeline(run_id, [s for s in steps if kept_steps is None or s.step in kept_steps])

    def replace_timeline(self, run_id: str, drop: Iterable[int], steps: Iterable[Step]) -> None:
        """Remove the intervals of the steps ``drop``, then store those of ``steps`` (rows stored already)."""
        drop, steps = list(drop), list(steps)
        if drop or steps:
            with self._tx():
                self._db.executemany("DELETE FROM timeline WHERE run_id=? AND step=?", [(run_id, k) for k in drop])
                self._insert_timeline(run_id, steps)

    def _insert_timeline(self, run_id: str, steps: list[Step]) -> None:
        self._db.executemany(
            "INSERT INTO timeline (run_id, step, device, kind, t0, t1) VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, s.step, dev, kind, t0, t1) for s in steps
             for dev, intervals in (s.intervals or {}).items() for kind, t0, t1 in intervals])

    def add_profile(self, run_id: str, rank: int, device: str, t0: float, trace_json: bytes) -> None:
        """A rank's torch.profiler Chrome trace, compressed (engine.measure.profiling)."""
        with self._tx():
            self._db.execute("INSERT INTO profiles (run_id, rank, device, t0, trace) VALUES (?, ?, ?, ?, ?)",
                             (run_id, rank, device, t0, gzip.compress(trace_json)))

    def profiles(self, run_id: str) -> list[tuple[int, str, float, dict]]:
        """(rank, device, t0, trace) of every profiled rank of the run, by rank."""
        return [(r["rank"], r["device"], r["t0"], json.loads(gzip.decompress(r["trace"])))
                for r in self._db.execute("SELECT rank, device, t0, trace FROM profiles WHERE run_id=? ORDER BY rank",
                                          (run_id,))]

    def add_samples(self, run_id: str, samples: Iterable[dict]) -> None:
        """Store telemetry samples (dicts with ``t`` relative to the run start, ``device`` and metrics)."""
        rows = [(run_id, s["t"], s["device"], *(s.get(f) for f in SAMPLE_FIELDS)) for s in samples]
        if not rows:
            return
        with self._tx():
            self._db.executemany(
                f"INSERT INTO samples (run_id, t, device, {', '.join(SAMPLE_FIELDS)}) "
                f"VALUES (?, ?, ?, {', '.join('?' * len(SAMPLE_FIELDS))})", rows)

    def thin_samples(self, run_id: str, before_t: float, bucket_s: float) -> int:
        """Replace the samples older than ``before_t`` (seconds since the run started) by one row per device and
        ``bucket_s`` seconds: the means of the measurements, the most memory used. Rows already as coarse stay.
        Returns how many rows fewer there are."""
        old = "run_id=? AND t < ? AND (span_s IS NULL OR span_s < ?)"
        # Whole buckets only: a bucket cut at before_t would leave two rows for one bucket.
        before_t = math.floor(before_t / bucket_s) * bucket_s
        with self._tx():
            before = self._db.execute(f"SELECT COUNT(*) FROM samples WHERE {old}",
                                      (run_id, before_t, bucket_s)).fetchone()[0]
            if not before:
                return 0
            added = self._db.execute(
                f"INSERT INTO samples (run_id, t, device, {', '.join(SAMPLE_FIELDS)}, span_s) "
                f"SELECT run_id, {bucket_start(bucket_s)} + {bucket_s / 2!r}, device, {AGGREGATES}, {bucket_s!r} "
                f"FROM samples WHERE {old} GROUP BY device, {bucket_start(bucket_s)}",
                (run_id, before_t, bucket_s)).rowcount
            self._db.execute(f"DELETE FROM samples WHERE {old}", (run_id, before_t, bucket_s))
        return before - added

    def finish_run(self, run_id: str, status: str, summary: RunSummary | None = None, error: str | None = None,
                   traceback: str | None = None) -> None:
        if status not in STATUSES or status == "running":
            raise ValueError(f"status must be one of {STATUSES[1:]}, got {status!r}")
        with self._tx():
            self._db.execute(
                "UPDATE runs SET status=?, ended=?, summary=?, error=?, traceback=? WHERE id=?",
                (status, time.time(), json.dumps(to_json(summary)) if summary is not None else None, error, traceback,
                 run_id))

    def create_experiment(self, name: str, plan: ExperimentPlan) -> str:
        exp_id = "exp-" + time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        with self._tx():
            self._db.execute("INSERT INTO experiments (id, name, created, params) VALUES (?, ?, ?, ?)",
                             (exp_id, name, time.time(), json.dumps(to_json(plan), sort_keys=True)))
        return exp_id

    def finish_experiment(self, exp_id: str, result: ExperimentResult) -> None:
        with self._tx():
            self._db.execute("UPDATE experiments SET result=? WHERE id=?", (json.dumps(to_json(result)), exp_id))

    # ---- reading ----------------------------------------------------------
    @staticmethod
    def _run(row: sqlite3.Row) -> RunRecord:
        # One row whose JSON cannot be read back must not hide every other run: it lists, and says why it is
        # bare (its row stays as it is).
        unreadable = []
        try:
            config = ExperimentConfig.from_stored(json.loads(row["config"]))
        except ValueError as exc:
            config, unreadable = ExperimentConfig(), [f"its stored config cannot be read ({exc})"]
        try:
            summary = from_json(RunSummary, json.loads(row["summary"])) if row["summary"] else None
        except ValueError as exc:
            summary, unreadable = None, [*unreadable, f"its stored summary cannot be read ({exc})"]
        error = "; ".join(filter(None, [row["error"], *unreadable])) or None
        return RunRecord(
            id=row["id"], started=row["started"], ended=row["ended"], status=row["status"], config=config,
            summary=summary, error=error, traceback=row["traceback"], experiment_id=row["experiment_id"],
            label=row["label"])

    def list_runs(self, limit: int | None = None, experiment_id: str | None = None) -> list[RunRecord]:
        """Runs, newest first."""
        sql = "SELECT * FROM runs"
        args: list[Any] = []
        if experiment_id is not None:
            sql += " WHERE experiment_id=?"
            args.append(experiment_id)
        sql += " ORDER BY started DESC, rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [self._run(r) for r in self._db.execute(sql, args)]

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self._db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return self._run(row) if row else None

    def get_experiment(self, exp_id: str) -> ExperimentRecord | None:
        row = self._db.execute("SELECT * FROM experiments WHERE id=?", (exp_id,)).fetchone()
        if row is None:
            return None
        return ExperimentRecord(row["id"], row["name"], row["created"],
                                from_json(ExperimentPlan, json.loads(row["params"])) or ExperimentPlan(),
                                from_json(ExperimentResult, json.loads(row["result"])) if row["result"] else None)

    def list_experiments(self) -> list[ExperimentRecord]:
        return [self.get_experiment(r["id"]) for r in
                self._db.execute("SELECT id FROM experiments ORDER BY created DESC, rowid DESC")]

    def steps(self, run_id: str, at_most: int | None = None) -> list[Step]:
        """The run's step rows in order; with ``at_most``, every k-th step (and the last) so that no more than
        that many come back: what a plot of a long run needs."""
        sql, args = "SELECT * FROM steps WHERE run_id=?", [run_id]
        if at_most is not None:
            count = self.step_count(run_id)
            if count > at_most:
                every = -(-count // at_most)
                sql += " AND (step % ? = 0 OR step = (SELECT MAX(step) FROM steps WHERE run_id=?))"
                args += [every, run_id]
        return [Step(step=r["step"], t=r["t"], time_s=r["time_s"], samples=r["samples"], throughput=r["throughput"],
                     loss=r["loss"], batch_split=json.loads(r["batch_split"]) if r["batch_split"] else None,
                     busy=json.loads(r["busy"]) if r["busy"] else None,
                     tensor_memory=json.loads(r["tensor_mem"]) if r["tensor_mem"] else None)
                for r in self._db.execute(sql + " ORDER BY step", args)]

    def step_times(self, run_id: str, steps: Iterable[int]) -> list[float]:
        """The time of each of ``steps`` that has one, in step order."""
        wanted = sorted(set(steps))
        return [r[0] for r in self._db.execute(
            f"SELECT time_s FROM steps WHERE run_id=? AND time_s IS NOT NULL AND step IN "
            f"({', '.join('?' * len(wanted))}) ORDER BY step", (run_id, *wanted))] if wanted else []

    def step_count(self, run_id: str) -> int:
        return self._db.execute("SELECT COUNT(*) FROM steps WHERE run_id=?", (run_id,)).fetchone()[0]

    def timeline(self, run_id: str, steps: Iterable[int] | None = None) -> list[tuple[int, str, str, float, float]]:
        """(step, device, kind, t0, t1) rows, in time order; only those of ``steps`` if given."""
        if steps is None:
            return [tuple(r) for r in self._db.execute(
                "SELECT step, device, kind, t0, t1 FROM timeline WHERE run_id=? ORDER BY t0", (run_id,))]
        wanted = sorted(set(steps))
        if not wanted:
            return []
        return [tuple(r) for r in self._db.execute(
            f"SELECT step, device, kind, t0, t1 FROM timeline WHERE run_id=? AND step IN "
            f"({', '.join('?' * len(wanted))}) ORDER BY t0", (run_id, *wanted))]

    def timeline_steps(self, run_id: str, last: int | None = None) -> list[int]:
        """The steps whose every interval is stored (all of them, or a sample: engine.record.timeline_keeper), in
        order; with ``last``, only the last that many (read backwards along the index: a day's run too)."""
        if last is None:
            return [r[0] for r in self._db.execute(
                "SELECT DISTINCT step FROM timeline WHERE run_id=? ORDER BY step", (run_id,))]
        return sorted(r[0] for r in self._db.execute(
            "SELECT DISTINCT step FROM timeline WHERE run_id=? ORDER BY step DESC LIMIT ?", (run_id, last)))

    def timeline_step_count(self, run_id: str) -> int:
        """How many steps kept every interval: as the run's summary says, else counted (a run still going,
        or one recorded before the summary kept the count)."""
        row = self._db.execute("SELECT summary FROM runs WHERE id=?", (run_id,)).fetchone()
        kept = (json.loads(row[0]) or {}).get("timeline_steps") if row and row[0] else None
        if kept is not None:
            return kept
        return self._db.execute("SELECT COUNT(DISTINCT step) FROM timeline WHERE run_id=?", (run_id,)).fetchone()[0]

    def samples(self, run_id: str, bucket_s: float | None = None) -> list[Sample]:
        """The run's telemetry rows in time order (``span_s`` None for a sample, else an aggregate's span);
        with ``bucket_s``, aggregated to one row per device and bucket, as ``thin_samples`` stores them."""
        fields = ", ".join(SAMPLE_FIELDS)
        if bucket_s is None:
            rows = self._db.execute(f"SELECT t, device, {fields}, span_s FROM samples WHERE run_id=? ORDER BY t",
                                    (run_id,))
        else:
            rows = self._db.execute(
                f"SELECT {bucket_start(bucket_s)} + {bucket_s / 2!r} AS t, device, {AGGREGATES}"
                f", {bucket_s!r} AS span_s FROM samples WHERE run_id=? GROUP BY device, {bucket_start(bucket_s)} "
                f"ORDER BY t", (run_id,))
        return [Sample(**dict(r)) for r in rows]

    def sample_span(self, run_id: str) -> tuple[int, float]:
        """(rows, seconds from the first to the last) of the run's telemetry."""
        row = self._db.execute("SELECT COUNT(*), MAX(t) - MIN(t) FROM samples WHERE run_id=?", (run_id,)).fetchone()
        return row[0], row[1] or 0.0

    def check_writable(self) -> None:
        """Raise sqlite3.Error if nothing can be written (a read-only file or disk)."""
        def probe() -> None:
            with self._tx():
                self._db.execute("CREATE TEMP TABLE IF NOT EXISTS _probe (x)")
                self._db.execute("CREATE TABLE IF NOT EXISTS _writable (x)")
                self._db.execute("DROP TABLE _writable")
        until_unlocked(probe)

    def integrity_ok(self) -> bool:
        return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def recover_from(self, kept: str | os.PathLike) -> repair.Recovery:
        """Copy what can be read of a damaged store set aside at ``kept`` into this one (engine/store/repair.py)."""
        return repair.copy_readable(Path(kept), self._db)
