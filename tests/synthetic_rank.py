"""A rank without torch, for the long-run tests: ``SPLITSCOPE_RANK_MODULE=tests.synthetic_rank``.

It speaks engine.run.rank's protocol (``ready``, one ``rank_step`` per step, ``done``
on the file descriptor SPLITSCOPE_EVENT_FD) as fast as the worker reads, with the
intervals of a 2-stage, 8-micro-batch pipeline step: what an hour of a small
pipeline sends, in seconds. Step k of rank r is deterministic, so a test can
recompute what the summary must say.

Real ranks keep step through their collectives; these do through a progress
file each beside the worker's rendezvous file, so no rank runs more than
``MAX_AHEAD`` steps ahead of the others (the worker would hold the difference).
"""
from __future__ import annotations

import json
import os
import sys
import time

MICRO_BATCHES = 8
STEP_S = 0.004  # each step's length on the shared clock
MAX_AHEAD = 200  # steps; progress is published every SYNC_EVERY steps
SYNC_EVERY = 50


def step_report(rank: int, world: int, step: int, origin: float) -> dict:
    # Every 1000th step is slow (three times as long): an outlier the sampled timeline must keep.
    start = origin + STEP_S * (step + 2 * (step // 1000))
    device = f"cpu:{rank}"
    slot = STEP_S / (2 * MICRO_BATCHES + 2)
    intervals = []
    for m in range(MICRO_BATCHES):  # forwards, then backwards, shifted by one slot per stage
        f0 = start + (m + rank) * slot
        intervals.append(["forward", f0, f0 + slot * 0.9])
        b0 = start + (MICRO_BATCHES + 1 + m + (world - 1 - rank)) * slot
        intervals.append(["backward", b0, b0 + slot * 0.9])
        intervals.append(["wait", f0 + slot * 0.9, f0 + slot])
    end = start + STEP_S * (3 if step % 1000 == 999 else 1)
    return {"type": "rank_step", "time": end, "step": step, "start": start, "end": end, "intervals": {device: intervals},
            "loss_part": 2.0 / (1 + step / 1000) if rank == world - 1 else None,
            "samples": 256 if rank == 0 else 0, "batch_split": None}


def _progress_file(rank: int) -> str:
    return f"{os.environ['SPLITSCOPE_STORE_FILE']}.synthetic-{rank}"


def _publish(rank: int, step: int) -> None:
    path = _progress_file(rank)
    with open(path + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(path + ".tmp", path)


def _slowest(world: int) -> int:
    steps = []
    for rank in range(world):
        try:
            with open(_progress_file(rank)) as f:
                steps.append(int(f.read() or 0))
        except (FileNotFoundError, ValueError):
            steps.append(0)
    return min(steps)


def main() -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    steps = json.loads(os.environ["SPLITSCOPE_CONFIG"])["steps"]
    out = os.fdopen(int(os.environ["SPLITSCOPE_EVENT_FD"]), "w", buffering=1 << 16, encoding="utf-8")
    out.write(json.dumps({"type": "ready", "time": time.perf_counter(), "pid": os.getpid(), "split": [4]}) + "\n")
    origin = time.perf_counter()
    for step in range(steps):
        if step % SYNC_EVERY == 0 and world > 1:
            _publish(rank, step)
            if step - _slowest(world) > MAX_AHEAD:
                out.flush()  # what this rank wrote reaches the worker while it waits
            while step - _slowest(world) > MAX_AHEAD:
                time.sleep(0.001)
        out.write(json.dumps(step_report(rank, world, step, origin), separators=(",", ":")) + "\n")
    if world > 1:
        _publish(rank, steps)
    out.write(json.dumps({"type": "done", "time": time.perf_counter(), "param_sq": 1.0, "change_sq": 0.5}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
