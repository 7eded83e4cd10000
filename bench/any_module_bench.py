"""Any-module benchmarks (issue 14): tracing time and the automatic split's stage balance.

For the example transformer (examples/tiny_transformer.py) and torchvision's own
resnet50 (``torchvision:resnet50`` at 128x128, the tutorial's image size):

- build: constructing the model and finding its split units (one forward pass);
- trace: ``pipeline()`` cutting a fresh model at the balanced split (median of 3);
- unit timing: the block timing that the balanced split comes from (a trace with
  a stage per unit, each unit's forward and backward timed, 3 repeats);
- balance: the balanced 2-stage split, the stage balance the unit timings
  predict (least / most stage time), and the stage balance a pipeline run on
  cpu:2 at that split measures (least / most busy stage).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.config import ExperimentConfig  # noqa: E402
from engine.rules import effective_batch_size, effective_micro_batches  # noqa: E402

CASES = {
    "tiny transformer": ExperimentConfig(model="custom", model_file=str(ROOT / "examples" / "tiny_transformer.py"),
                                         strategy="pipeline", devices="cpu:2", batch_size=64, steps=10),
    "torchvision:resnet50": ExperimentConfig(model="torchvision:resnet50", image_size=128, strategy="pipeline",
                                             devices="cpu:2", batch_size=16, steps=6),
    "torchvision:resnet50, --split-level 2": ExperimentConfig(model="torchvision:resnet50", image_size=128,
                                                              split_level=2, strategy="pipeline", devices="cpu:2",
                                                              batch_size=16, steps=6),
}


def measure(config: ExperimentConfig, db: str) -> dict:
    import torch

    from bench.engine_bench import run
    from engine.models import tracing
    from engine.models.build import build
    from engine.planner import planning
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    spec = build(config)
    build_s = time.perf_counter() - t0
    micro = effective_batch_size(config) // effective_micro_batches(config)
    t0 = time.perf_counter()
    infos = planning.block_costs(spec, micro)
    timing_s = time.perf_counter() - t0
    costs = [b.cost_s for b in infos]
    split = planning.balanced_split(costs, 2)
    predicted = min(sum(costs[:split[0]]), sum(costs[split[0]:])) / max(sum(costs[:split[0]]), sum(costs[split[0]:]))
    traces = []
    for _ in range(3):
        fresh = build(config)
        inputs = fresh.data.sample(micro)[0]
        t0 = time.perf_counter()
        tracing.cut(fresh, split, inputs)
        traces.append(time.perf_counter() - t0)
    summary = run(config.replace(split=split), db)
    return {"units": len(infos), "build_s": build_s, "trace_s": statistics.median(traces), "timing_s": timing_s,
            "split": [infos[k].name for k in split], "predicted_balance": predicted,
            "measured_balance": summary.stage_balance, "step_ms": summary.step_time_s.mean * 1e3}


def main(db: str | None = None) -> dict:
    import tempfile
    db = db or str(Path(tempfile.mkdtemp()) / "bench.sqlite3")
    results = {}
    print("tracing and the automatic split (2 stages, pipeline m=4 on cpu:2):", flush=True)
    for name, config in CASES.items():
        r = results[name] = measure(config, db)
        print(f"  {name}: {r['units']} split points; build {r['build_s']:.2f} s, trace {r['trace_s']:.2f} s "
              f"(median of 3), unit timing {r['timing_s']:.2f} s; balanced split at {', '.join(r['split'])}: "
              f"stage balance predicted {r['predicted_balance']:.2f}, measured {r['measured_balance']:.2f} "
              f"(step {r['step_ms']:.0f} ms)", flush=True)
    return results


if __name__ == "__main__":
    main()
