"""Throughput against DataLoader workers (``--input-prep loader``): resnet18 at 64 px on cpu:1, its images
JPEG-decoded and augmented per sample (engine/run/loader.py), with no further decode cost and with 2 ms more a
sample, in alternating rounds (``python -m bench.loader_bench``; ``make bench`` runs it). The devices hold core
0; the workers run on the cores no device holds (on the 2-core machine, core 1: two workers share it)."""
from __future__ import annotations

import os
import statistics
import tempfile

from engine.config import ExperimentConfig
from engine.cores import usable_cores
from engine.record.time_by_kind import input_share
from engine.run.session import RunSession

WORKERS = (0, 1, 2)
DECODE_COSTS_MS = (0.0, 2.0)
BASE = ExperimentConfig(model="resnet18", devices="cpu:1", batch_size=32, steps=12, warmup=2, input_prep="loader")


def measured(config: ExperimentConfig, db: str) -> tuple[float, float]:
    """(throughput, the device's share on its input: decoding it itself, or waiting for its workers) of one run."""
    session = RunSession(config, db_path=db, telemetry_hz=10)
    session.start()
    result = session.wait(600)
    if result is None or result.status != "finished":
        raise RuntimeError(f"{config.loader_workers} workers: {result and result.error}")
    summary = result.summary
    return summary.throughput.mean, max(input_share(d) for d in summary.time_by_kind)


def sweep(rounds: int = 3) -> list[dict]:
    db = os.path.join(tempfile.mkdtemp(prefix="splitscope-loader-bench-"), "runs.db")
    rows = []
    for cost in DECODE_COSTS_MS:
        each = {w: [] for w in WORKERS}
        for _ in range(rounds):
            for w in WORKERS:
                each[w].append(measured(BASE.replace(loader_workers=w, decode_cost_ms=cost), db))
        for w in WORKERS:
            throughput = statistics.median(t for t, _ in each[w])
            rows.append({"decode_cost_ms": cost, "workers": w, "throughput": throughput,
                         "input_wait": statistics.median(s for _, s in each[w]),
                         "speedup": throughput / statistics.median(t for t, _ in each[0])})
    return rows


def main() -> list[dict]:
    print(f"loader: resnet18 64 px batch 32 on cpu:1 (cores {usable_cores()}), JPEG decode + random resized crop + "
          "flip + normalize per sample, 3 alternating rounds, medians:", flush=True)
    rows = sweep()
    for r in rows:
        print(f"  decode +{r['decode_cost_ms']:g} ms/sample, {r['workers']} workers: {r['throughput']:.1f} samples/s "
              f"(x{r['speedup']:.2f} of 0 workers), input wait {100 * r['input_wait']:.0f} % of the step", flush=True)
    return rows


if __name__ == "__main__":
    main()
