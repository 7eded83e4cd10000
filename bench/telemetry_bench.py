"""The telemetry sampler's own CPU cost, at 10 Hz and at 50 Hz.

Goal (issue 3): at most 1% of one core at 10 Hz. The cost is the CPU time of
the sampler thread alone (``time.thread_time`` read inside it), so this
process's other threads and other processes on the machine do not count.
Targets: every GPU NVML sees plus one CPU virtual device per usable core, each
reporting this process's RSS, as a run over all cores would.

    python -m bench.telemetry_bench [--seconds 5]
"""
from __future__ import annotations

import argparse
import os
import time

from engine.devices import usable_cores
from engine.telemetry import CpuTarget, GpuTarget, TelemetrySampler, nvml


def bench_targets() -> list:
    gpus = [GpuTarget(f"gpu {i}", i) for i in range(nvml.device_count())]  # every GPU, by NVML index
    cpus = [CpuTarget(f"cpu:{n}", core, pid=os.getpid()) for n, core in enumerate(usable_cores())]
    return gpus + cpus


def measure(rate_hz: float, seconds: float) -> dict:
    """Sample for ``seconds`` at ``rate_hz``; the sampler thread's CPU use, and more."""
    sampler = TelemetrySampler(bench_targets(), rate_hz=rate_hz)
    start = time.perf_counter()
    sampler.start()
    time.sleep(seconds)  # the main thread only waits: the cost measured is the sampler's
    sampler.stop()
    wall = time.perf_counter() - start
    samples = sampler.drain()
    return {
        "rate_hz": rate_hz,
        "targets": len(sampler.targets),
        "seconds": round(wall, 2),
        "passes": sampler.passes,
        "samples": len(samples),
        "achieved_hz": round(sampler.passes / wall, 2),
        "cpu_ms": round(sampler.cpu_time_s * 1000, 1),
        "core_percent": round(100 * sampler.cpu_time_s / wall, 3),
        "us_per_pass": round(1e6 * sampler.cpu_time_s / max(1, sampler.passes), 1),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to sample at each rate")
    args = parser.parse_args(argv)
    gpus = nvml.device_count()
    print(f"telemetry sampler cost: {gpus} GPU(s), {len(usable_cores())} core(s), "
          f"{args.seconds:g} s per rate; goal <= 1% of one core at 10 Hz")
    results = []
    for rate in (10.0, 50.0):
        r = measure(rate, args.seconds)
        results.append(r)
        verdict = ("ok" if r["core_percent"] <= 1.0 else "OVER GOAL") if rate == 10.0 else ""
        print(f"  {rate:>4g} Hz: {r['core_percent']:.3f}% of one core ({r['cpu_ms']} ms CPU in {r['seconds']} s, "
              f"{r['us_per_pass']} us/pass, {r['passes']} passes = {r['achieved_hz']} Hz, "
              f"{r['targets']} targets) {verdict}".rstrip())
    return results


if __name__ == "__main__":
    main()
