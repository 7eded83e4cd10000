"""``make bench``: every benchmark, figures as ratios measured within one run.

The machine is shared and noisy: quote medians and ratios, and run on a quiet machine.
"""
from __future__ import annotations

import importlib
import sys

BENCHES = ["bench.engine_bench", "bench.gloo_exchange", "bench.any_module_bench", "bench.telemetry_bench",
           "bench.app_bench", "bench.long_run_bench", "bench.sharding_bench", "bench.nodes_bench", "bench.watch_bench",
           "bench.loader_bench", "bench.efficiency_bench", "bench.trace_bench", "bench.advise_bench"]


def main(names: list[str]) -> int:
    for name in names or BENCHES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            print(f"== {name}: not available ({exc})")
            continue
        print(f"== {name}", flush=True)
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
