"""Sharding benchmarks (issue 16), each measured within one run of this script.

- memory-scaling on cpu:2 and cpu:4 (mlp 512x8, batch 1024, AdamW): each point's tensor memory per device by
  kind, step time and bytes moved per step. Beyond 2 devices the devices share the 2 cores: the memory and
  the bytes still hold, the step times are not those of separate devices.
- the collective meter's own cost: a one-process mlp step with the TorchDispatchMode entered (it sees every
  op and times the collectives; here there are none) against the same step without it, alternating rounds.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.config import ExperimentConfig  # noqa: E402
from engine.experiments import ExperimentRunner  # noqa: E402
from engine.figures.experiment import memory_by_kind_figure  # noqa: E402

BASE = dict(model="mlp", width=512, depth=8, batch_size=1024, steps=8, warmup=2)


def memory_scaling(db: str, devices: str) -> list[list]:
    result = ExperimentRunner("memory-scaling", ExperimentConfig(**BASE, devices=devices), repeats=1,
                              db_path=db).run()
    figure = memory_by_kind_figure(result.name, result.points)
    return [figure.columns, *figure.rows]


def meter_overhead(rounds: int = 5, steps: int = 20) -> dict:
    import torch
    from torch import nn

    from engine.devices import Device
    from engine.measure.communication import CommLedger, collective_meter
    from engine.measure.timing import StepTimer
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.ReLU()) for _ in range(8)], nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    meter = collective_meter(StepTimer(), CommLedger(), Device(kind="cpu", index=0, name="cpu:0", core=None))

    def step():
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    def timed(with_meter: bool) -> float:
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            if with_meter:
                with meter:
                    step()
            else:
                step()
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    timed(False)
    plain, metered = [], []
    for _ in range(rounds):
        plain.append(timed(False))
        metered.append(timed(True))
    p, m = statistics.median(plain), statistics.median(metered)
    return {"plain_ms": p * 1e3, "metered_ms": m * 1e3, "overhead": m / p - 1}


def main(db: str | None = None) -> dict:
    import tempfile
    db = db or str(Path(tempfile.mkdtemp()) / "bench.sqlite3")
    results = {}
    o = results["meter"] = meter_overhead()
    print(f"collective meter's cost (mlp 512x8 batch 512, one process): plain {o['plain_ms']:.1f} ms, metered "
          f"{o['metered_ms']:.1f} ms: {o['overhead']:+.1%}", flush=True)
    for devices in ("cpu:2", "cpu:4"):
        print(f"memory-scaling on {devices} (mlp 512x8, batch 1024, AdamW; MiB per device, means over devices):",
              flush=True)
        rows = results[devices] = memory_scaling(db, devices)
        print("  " + " | ".join(rows[0]), flush=True)
        for row in rows[1:]:
            print("  " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row), flush=True)
    return results


if __name__ == "__main__":
    main()
