"""What watching costs a script: each example's own step time, watched and with the instruments left out, in
alternating rounds of one run (``python -m bench.watch_bench``; ``make bench`` runs it).

Both arms are the same run (``main.py watch``: the same pinned ranks, the same loader placement); the plain
arm sets SPLITSCOPE_WATCH_INSTRUMENTS=0, which the bootstrap reads to run the script untimed. The figure
compared is the script's own: each example prints its mean step after its first two
(``... ms per step``), so the hooks' cost is measured by a clock they do not touch.
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {
    "ddp_train.py (DDP, DataLoader)": ["examples/ddp_train.py", "--steps", "40", "--batch-size", "64"],
    "fsdp_train.py (FSDP2)": ["examples/fsdp_train.py", "--steps", "30", "--width", "512", "--depth", "4"],
    "pipeline_train.py (GPipe m=4)": ["examples/pipeline_train.py", "--steps", "20", "--width", "512", "--depth",
                                      "8", "--split", "4", "--batch-size", "1024", "--micro-batches", "4"],
}


def script_step_ms(args: list[str], instruments: bool, db: str) -> float:
    env = dict(os.environ, SPLITSCOPE_WATCH_INSTRUMENTS="1" if instruments else "0")
    proc = subprocess.run([sys.executable, "main.py", "watch", "--devices", "cpu:2", "--db", db, "--", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    found = re.search(r"([\d.]+) ms per step", proc.stderr + proc.stdout)
    if proc.returncode or not found:
        raise RuntimeError(f"{args[0]} (instruments {instruments}) ended with {proc.returncode}: "
                           f"{proc.stderr[-2000:]}")
    return float(found.group(1))


def watch_overhead(rounds: int = 3) -> list[dict]:
    """Per example: the median of each arm's step times over ``rounds`` alternating rounds, and their ratio."""
    db = os.path.join(tempfile.mkdtemp(prefix="splitscope-watch-bench-"), "runs.db")
    rows = []
    for name, args in EXAMPLES.items():
        watched, plain = [], []
        for _ in range(rounds):
            plain.append(script_step_ms(args, False, db))
            watched.append(script_step_ms(args, True, db))
        rows.append({"example": name, "plain_ms": statistics.median(plain), "watched_ms": statistics.median(watched),
                     "overhead": statistics.median(watched) / statistics.median(plain) - 1,
                     "plain_each": plain, "watched_each": watched})
    return rows


def main() -> list[dict]:
    print(f"watch overhead: each example's own step time, watched vs untimed, cpu:2, 3 alternating rounds, "
          f"medians:", flush=True)
    rows = watch_overhead()
    for r in rows:
        print(f"  {r['example']}: untimed {r['plain_ms']:.2f} ms, watched {r['watched_ms']:.2f} ms: "
              f"{r['overhead']:+.1%} (each: untimed {', '.join(f'{x:.1f}' for x in r['plain_each'])}; watched "
              f"{', '.join(f'{x:.1f}' for x in r['watched_each'])})", flush=True)
    return rows


if __name__ == "__main__":
    main()
