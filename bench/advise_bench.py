"""Advise (issue 56) against a sweep of the same space, each measured in one run of this script.

For three models (the tutorials' ToyModel, torchvision's resnet18 at 32x32, the example transformer,
examples/tiny_transformer.py) on cpu:2 and cpu:4: advise (the probes, its ranking, its checks of the best few
within its default budget), then every candidate of its space that fits run as its checks run them
(engine/advise/verify.py: a short run each, the same steps), one after the other. Printed per case: the advised
choice's measured throughput against the best of the sweep (goal: at least 0.95 of it), measured in the sweep
itself as well (the same conditions as the best's), and advise's time against the sweep's (goal: at most
0.10 of it); beside them the predictions' median error against the sweep's measurements and whether the best
predicted and the best measured agree. The fork server is started before the first timing: both pay it alike.

``--quick`` sweeps a part of the space: the strategies without a split, and each schedule at its default stages
per device and at 2, 4 and 8 micro-batches over the balanced split alone (the neighbouring splits and other V
left out), with the advised choice added where it is not among them.

    python -m bench.advise_bench [--quick] [--case toy|resnet18|transformer ...] [--devices cpu:2 ...]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.config import ExperimentConfig  # noqa: E402

CASES = {
    "toy": ("the ToyModel (seed-toy)", dict(model="seed-toy")),
    "resnet18": ("torchvision:resnet18 at 32x32, batch 32", dict(model="torchvision:resnet18", image_size=32,
                                                                   batch_size=32)),
    "transformer": ("tiny transformer, batch 64", dict(model="custom", batch_size=64,
                                                      model_file=str(ROOT / "examples" / "tiny_transformer.py"))),
}
DEVICES = ("cpu:2", "cpu:4")
QUICK_MICRO_BATCHES = (2, 4, 8)


def balanced_only(ranking) -> list:
    """``--quick``'s part of the space (the module's docstring)."""
    from engine.planner.planning import balanced_split
    from engine.strategies.pipeline.schedules import SCHEDULE_INFO
    blocks = ranking.model.blocks
    kept = []
    for entry in ranking.candidates:
        c = entry.candidate
        if not entry.prediction.fits:
            continue
        if c.strategy == "pipeline":
            default = SCHEDULE_INFO[c.schedule].stages_per_device[0]
            if (c.stages_per_device or 1) != default or c.micro_batches not in QUICK_MICRO_BATCHES:
                continue
        if c.split:
            samples = ranking.batch_size / (c.micro_batches or 1)
            costs = [b.forward_s(samples) + b.backward_s(samples) for b in blocks]
            if list(balanced_split(costs, len(c.split) + 1)) != c.split:
                continue
        kept.append(entry)
    return kept


def advise_and_sweep(config: ExperimentConfig, db: str, quick: bool) -> dict:
    from engine.advise import verify
    from engine.advise.advice import advice
    from engine.advise.command import DEFAULT_BUDGET_S
    from engine.advise.ranking import rank_in_child
    started = time.perf_counter()
    ranking = rank_in_child(config, None)
    if ranking.problems:
        return {"error": "; ".join(ranking.problems)}
    checks = verify.check(ranking.candidates, config, DEFAULT_BUDGET_S, db_path=db)
    advised = advice(ranking, checks, config, time.perf_counter() - started)
    advise_s = time.perf_counter() - started
    space = balanced_only(ranking) if quick else [r for r in ranking.candidates if r.prediction.fits]
    if advised.choice.label not in {r.label for r in space}:
        space.append(advised.choice)
    started = time.perf_counter()
    swept = verify.check(space, config, math.inf, most=len(space), db_path=db)
    sweep_s = time.perf_counter() - started
    measured = [r for r in swept.candidates if r.measured and r.measured.throughput]
    best = max(measured, key=lambda r: r.measured.throughput)
    in_sweep = next((r for r in measured if r.label == advised.choice.label), None)
    errors = [abs(r.prediction_error) for r in measured if r.prediction_error is not None]
    best_predicted = min(measured, key=lambda r: r.prediction.step_s)
    return {"choice": advised.choice.label, "choice_throughput": advised.choice.measured.throughput
            if advised.choice.measured else None,
            "choice_in_sweep": in_sweep.measured.throughput if in_sweep else None,
            "best": best.label, "best_throughput": best.measured.throughput, "tied_with_best": swept.tied
            if swept.best == best.label else [], "advise_s": advise_s, "probe_s": advised.probe_s,
            "check_s": advised.check_s, "sweep_s": sweep_s, "swept": len(space), "space": len(ranking.candidates),
            "fitting": sum(r.prediction.fits for r in ranking.candidates),
            "median_error": statistics.median(errors) if errors else None, "best_predicted": best_predicted.label,
            "failed": [r.label for r in swept.candidates if r.measured and r.measured.error],
            "disturbed": sum(1 for r in measured if r.measured.disturbed), "measured": len(measured)}


def report(title: str, devices: str, r: dict) -> None:
    if "error" in r:
        print(f"  {title} on {devices}: {r['error']}", flush=True)
        return
    advised = r["choice_throughput"] or 0.0
    print(f"  {title} on {devices}: advise chose {r['choice']} in {r['advise_s']:.1f} s (probes {r['probe_s']:.1f}, "
          f"checks {r['check_s']:.1f}) of {r['space']} candidates; sweep of {r['swept']} in {r['sweep_s']:.0f} s, "
          f"best {r['best']}", flush=True)
    in_sweep = f", {r['choice_in_sweep'] / r['best_throughput']:.2f} as the sweep measured it" \
        if r["choice_in_sweep"] else ""
    tied = f" (tied with the best: {', '.join(r['tied_with_best'])})" if r["tied_with_best"] else ""
    print(f"    throughput advised / best of the sweep: {advised / r['best_throughput']:.2f}{in_sweep}{tied} "
          f"(goal >= 0.95); time advise / sweep: {r['advise_s'] / r['sweep_s']:.3f} (goal <= 0.10)", flush=True)
    fitting = r["fitting"]
    if r["swept"] < fitting:   # --quick: the whole space's sweep at this one's mean time a candidate
        whole = r["sweep_s"] / r["swept"] * fitting
        print(f"    the whole space's {fitting} candidates that fit at the sweep's mean time each: about {whole:.0f} s;"
              f" advise / that: {r['advise_s'] / whole:.3f}", flush=True)
    error = f"{r['median_error']:.0%}" if r["median_error"] is not None else "none"
    print(f"    predictions against the sweep: median |error| {error}; best predicted {r['best_predicted']}; "
          f"{r['disturbed']} of {r['measured']} runs disturbed; failed: {', '.join(r['failed']) or 'none'}",
          flush=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.advise_bench")
    parser.add_argument("--quick", action="store_true", help="sweep a part of the space (the module's docstring)")
    parser.add_argument("--case", action="append", choices=list(CASES), help="default: all")
    parser.add_argument("--devices", action="append", help="default: cpu:2 and cpu:4")
    args = parser.parse_args(argv if argv is not None else [])
    from engine import forkserver
    from engine.environment import with_project_path
    # The fork server started (torch imported) before anything is timed.
    forkserver.run_module("engine.cores", input="", env=with_project_path(), cwd=ROOT, timeout=300)
    db = str(Path(tempfile.mkdtemp()) / "bench.sqlite3")
    results = {}
    print(f"advise against a {'partial (--quick) ' if args.quick else ''}sweep of its space:", flush=True)
    for case in args.case or list(CASES):
        title, options = CASES[case]
        for devices in args.devices or DEVICES:
            config = ExperimentConfig(**options, devices=devices)
            results[(case, devices)] = r = advise_and_sweep(config, db, args.quick)
            report(title, devices, r)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
