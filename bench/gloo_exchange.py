"""How long a pipeline hand-over takes over gloo between two pinned processes, one way and both ways at once.

    python -m bench.gloo_exchange [ROWS ...]

Two processes, each pinned to a core with one intra-op thread as the engine's
CPU ranks are, post their receives, meet at a barrier and send ROWS x 512
float32 tensors (the bench's mlp 512x8 at batch 2048: 512 rows at m=4, 256 at
m=8) in four patterns: one tensor one way; two one way; one each way; two each
way at once, which is what DualPipeV's overlapped pairs do (each rank sends its
pair's forward output and backward gradient as the pair ends, and both ranks'
pairs end together). Printed: each pattern's median and mean time from the
sends to the last receive, over 35 tries after 5 to warm up. On this project's 2-core machine
(2026-12-05) one way took 0.2-1.0 ms, both ways at once 0.5-3 ms median with a
tail to 4-6 ms: why DualPipeV's measured steps were slower than engine/planner/what_if.py
predicted from a GPipe run, which never sends both ways at once. Each pipeline run
now measures it itself after its last step (engine/strategies/pipeline/exchange_probe.py).
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

PATTERNS = (("one way, 1 tensor", 1, 0), ("one way, 2 tensors", 2, 0), ("both ways, 1 each", 1, 1),
            ("both ways, 2 each (DualPipeV's pair end)", 2, 2))
TRIES, WARMUP, WIDTH = 40, 5, 512


def _rank(rank: int, store_file: str, rows: list[int], results) -> None:
    if hasattr(os, "sched_setaffinity"):   # Linux: pinned as the engine's CPU ranks are
        os.sched_setaffinity(0, {rank % len(os.sched_getaffinity(0))})
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_file, 2), rank=rank, world_size=2)
    other = 1 - rank
    for size in rows:
        for name, from_first, from_second in PATTERNS:
            mine, theirs = (from_first, from_second) if rank == 0 else (from_second, from_first)
            times = []
            for _ in range(TRIES):
                inbox = [torch.empty(size, WIDTH) for _ in range(theirs)]
                outbox = [torch.randn(size, WIDTH) for _ in range(mine)]
                receives = [dist.irecv(tensor, other) for tensor in inbox]
                dist.barrier()
                start = time.perf_counter()
                sends = [dist.isend(tensor, other) for tensor in outbox]
                for work in receives + sends:
                    work.wait()
                times.append(time.perf_counter() - start)
            results[(size, name, rank)] = times[WARMUP:]
    dist.destroy_process_group()


def measure(rows: list[int]) -> dict[tuple[int, str], list[float]]:
    """Per (rows, pattern), the slower rank's time of each try, in seconds."""
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory(prefix="splitscope-gloo-") as folder, mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_rank, args=(os.path.join(folder, "store"), rows, results), nprocs=2)
        return {(size, name): [max(a, b)
                               for a, b in zip(results[(size, name, 0)], results[(size, name, 1)], strict=True)]
                for size in rows for name, *_ in PATTERNS}


def main(argv: list[str] | None = None) -> None:
    rows = [int(a) for a in argv or []] or [256, 512]
    for (size, name), times in measure(rows).items():
        print(f"{size:4d} x {WIDTH}  {name:42s} median {statistics.median(times) * 1e3:5.2f} ms  "
              f"mean {statistics.fmean(times) * 1e3:5.2f} ms  max {max(times) * 1e3:5.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
