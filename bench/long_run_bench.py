"""Long runs: memory of each process and the store's size against steps, from the synthetic stream;
and how long the largest run takes to open in the app's history.

The same path a real run takes (the worker's merge and totals, the session's
recorder, the store), with torch-free ranks (tests/synthetic_rank.py, a
2-stage 8-micro-batch pipeline's intervals) so 100,000 steps take a minute.
The session's RSS is this process's; the worker's is read from outside.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.config import ExperimentConfig  # noqa: E402
from engine.results import Step  # noqa: E402
from engine.run.session import RunSession  # noqa: E402

MB = 2 ** 20


def stream(steps: int, db: str) -> dict:
    me = psutil.Process()
    marks: dict[str, float] = {}
    session = None

    def on_event(event):
        if isinstance(event, Step) and event.step == steps - 1:
            marks["session"] = me.memory_info().rss / MB
            marks["worker"] = psutil.Process(session.pid).memory_info().rss / MB

    os.environ["SPLITSCOPE_RANK_MODULE"] = "tests.synthetic_rank"
    try:
        started = time.perf_counter()
        session = RunSession(ExperimentConfig(strategy="pipeline", devices="cpu:2", steps=steps, warmup=2,
                                              micro_batches=8, batch_size=256), db_path=db, on_event=on_event)
        session.start()
        result = session.wait()
        wall = time.perf_counter() - started
    finally:
        del os.environ["SPLITSCOPE_RANK_MODULE"]
    if result.status != "finished":
        raise RuntimeError(f"synthetic run {result.status}: {result.error}")
    size = sum(os.path.getsize(p) for p in (db, f"{db}-wal") if os.path.exists(p)) / MB
    return {"steps": steps, "session_mb": marks["session"], "worker_mb": marks["worker"], "store_mb": size,
            "wall_s": wall, "db": db, "run_id": result.run_id}


def main() -> list[dict]:
    rows = []
    print("long runs, synthetic stream (2-stage, 8-micro-batch pipeline intervals), a fresh store each:", flush=True)
    for steps in (1_000, 10_000, 100_000, 200_000):
        row = stream(steps, str(Path(tempfile.mkdtemp()) / "runs.sqlite3"))
        rows.append(row)
        print(f"  {steps:>7,} steps: session {row['session_mb']:.1f} MB, worker {row['worker_mb']:.1f} MB, "
              f"store {row['store_mb']:.1f} MB, {row['wall_s']:.1f} s ({steps / row['wall_s']:,.0f} steps/s)",
              flush=True)
    from bench.app_measurements import GOALS, bench_history_open
    opened = bench_history_open(rows[-1]["db"], rows[-1]["run_id"])
    print(f"  the {rows[-1]['steps']:,}-step run opens in the app's history in {opened['median_ms']:.0f} ms "
          f"(median of {opened['times']}, worst {opened['max_ms']:.0f}; goal < {GOALS['history_open_ms']:.0f})",
          flush=True)
    return rows


if __name__ == "__main__":
    main()
