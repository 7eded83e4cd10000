"""What counting FLOPs and measuring the peak cost, and the MFU they give (``python -m bench.efficiency_bench``;
``make bench`` runs it).

1. The FLOP counter's one-step cost (engine/measure/flops.py): a training step of the mlp (512 wide, 8 deep,
   batch 2048) and of resnet18 (batch 32 at 64 px) on one core, counted and not, in alternating rounds;
   the counted step's time over the plain one's, medians.
2. The peak's calibration (engine/measure/peak.py) on a fresh cache, float32 and bfloat16: the wall time a run's
   first step waits for it on a machine's first run (cached after).
3. MFU of a default mlp run and a resnet18 run on cpu:1, through the engine as a user runs them.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

ROUNDS = 5


def step_cost(model: str, **options) -> tuple[float, float]:
    """(plain step s, counted step s), medians over alternating rounds, on core 0 with one thread."""
    import torch

    from engine.config import ExperimentConfig
    from engine.measure.flops import DeviceFlops
    from engine.models.build import build
    config = ExperimentConfig(model=model, **options)
    spec = build(config)
    module = spec.whole()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    inputs, targets = next(spec.data.batches(config.batch_size or 32))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        spec.loss_fn(module(inputs), targets).backward()
        optimizer.step()
    step()
    plain, counted = [], []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        step()
        plain.append(time.perf_counter() - started)
        flops = DeviceFlops("cpu:0")
        started = time.perf_counter()
        with flops.counting():
            step()
        counted.append(time.perf_counter() - started)
    return statistics.median(plain), statistics.median(counted)


def calibration_s(dtype: str) -> float:
    import shutil

    from engine.devices import Device
    from engine.measure import peak
    before, scratch = os.environ.get("SPLITSCOPE_CACHE_DIR"), tempfile.mkdtemp(prefix="splitscope-peak-bench-")
    os.environ["SPLITSCOPE_CACHE_DIR"] = scratch   # a fresh machine's first run
    try:
        started = time.perf_counter()
        figure = peak.measured_peak(Device("cpu:0", "cpu", 0), dtype)
        took = time.perf_counter() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if before is None:
            os.environ.pop("SPLITSCOPE_CACHE_DIR", None)
        else:
            os.environ["SPLITSCOPE_CACHE_DIR"] = before
    print(f"  calibration {dtype}: {took:.2f} s wall on a fresh cache, {figure.flops_per_s / 1e9:.1f} GFLOP/s "
          f"({figure.source})", flush=True)
    return took


def run_mfu(**options) -> float | None:
    from engine.config import ExperimentConfig
    from engine.run.session import RunSession
    db = os.path.join(tempfile.mkdtemp(prefix="splitscope-efficiency-bench-"), "runs.db")
    session = RunSession(ExperimentConfig(devices="cpu:1", **options), db_path=db, telemetry_hz=10)
    session.start()
    result = session.wait(600)
    if result is None or result.status != "finished" or result.summary.efficiency is None:
        raise RuntimeError(f"{options}: {result and result.error}")
    (device,) = result.summary.efficiency.devices
    print(f"  {options.get('model')} single cpu:1: {device.text()}", flush=True)
    return device.mfu


def main() -> dict:
    import torch
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"efficiency: the FLOP counter's cost on one step ({ROUNDS} alternating rounds, medians), the peak's "
          "calibration, MFU of single runs:", flush=True)
    figures = {}
    for model, options in (("mlp", {"width": 512, "depth": 8, "batch_size": 2048}),
                           ("resnet18", {"batch_size": 32, "image_size": 64})):
        plain, counted = step_cost(model, **options)
        figures[f"counter_{model}"] = counted / plain
        print(f"  {model}: step {plain * 1e3:.1f} ms plain, {counted * 1e3:.1f} ms counted (x{counted / plain:.3f})",
              flush=True)
    for dtype in ("float32", "bfloat16"):
        figures[f"calibration_{dtype}_s"] = calibration_s(dtype)
    figures["mfu_mlp"] = run_mfu(model="mlp", steps=20)
    figures["mfu_resnet18"] = run_mfu(model="resnet18", steps=12)
    return figures


if __name__ == "__main__":
    main()
