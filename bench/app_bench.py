"""App benchmarks (issue 4): redraw cost, idle CPU, UI-thread stalls during a run.

    python -m bench.app_bench [--json] [--skip-run]

The measurements themselves are Qt code and live in app/benchmarks.py (every
line of Qt stays in app/); see its docstring for what each one does.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.benchmarks import GOALS, private_env, bench_idle_cpu, bench_redraw, bench_stalls  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--skip-run", action="store_true", help="skip the stall benchmark (it trains)")
    args = parser.parse_args([] if argv is None else argv)  # make bench calls main() with no arguments
    with tempfile.TemporaryDirectory(prefix="splitscope-bench-") as tmp:
        private_env(tmp)
        results = {"redraw": bench_redraw(), "idle": bench_idle_cpu()}
        if not args.skip_run:
            results["stalls"] = bench_stalls()
    results["goals"] = GOALS
    results["met"] = {
        "redraw_median_ms": results["redraw"]["window_1h"]["median_ms"] <= GOALS["redraw_median_ms"],
        "idle_cpu_percent": results["idle"]["cpu_percent_of_a_core"] <= GOALS["idle_cpu_percent"],
    }
    if "stalls" in results and results["stalls"].get("stall_max_ms") is not None:
        results["met"]["stall_max_ms"] = results["stalls"]["stall_max_ms"] < GOALS["stall_max_ms"]
    if args.json:
        print(json.dumps(results))
    else:
        r = results["redraw"]
        print(f"app: redraw, {r['devices']} devices, 1 h of {10} Hz history ({r['telemetry_points']:,} points):")
        print(f"  2-minute window: median {r['window_2min']['median_ms']} ms, p95 {r['window_2min']['p95_ms']} ms")
        print(f"  whole hour in view: median {r['window_1h']['median_ms']} ms, p95 {r['window_1h']['p95_ms']} ms "
              f"(goal <= {GOALS['redraw_median_ms']:g})")
        i = results["idle"]
        print(f"app: idle CPU with telemetry at {i['telemetry_hz']:g} Hz on {i['devices']} devices: "
              f"{i['cpu_percent_of_a_core']}% of a core (goal <= {GOALS['idle_cpu_percent']:g}%)")
        if "stalls" in results:
            s = results["stalls"]
            print(f"app: UI-thread stalls during a run ({s.get('status')}, {s.get('run_s')} s): "
                  f"max {s.get('stall_max_ms')} ms, p99 {s.get('stall_p99_ms')} ms "
                  f"(goal < {GOALS['stall_max_ms']:g}); the app's process used "
                  f"{s.get('app_cpu_percent_of_a_core')}% of a core meanwhile")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
