"""Engine benchmarks (issue 2), each a ratio measured within one run of this script.

- pipeline vs naive: GPipe with 4 micro-batches against model-parallel on cpu:2,
  as a fraction of the ideal speedup p*m/(m+p-1) = 1.6, over several mlp shapes;
- engine overhead: ``single`` against a plain hand-written loop on the same
  model, data and one pinned thread;
- bubble table: measured against theoretical bubble for the naive split, GPipe and
  1F1B at m = 2, 4, 8 on cpu:2;
- staged overhead: model-parallel and GPipe m=4 against a plain
  torch.distributed.pipelining script (bench/plain_pipeline.py) with the same
  model, split, prepared batches and pinning, alternating rounds;
- launch latency: from starting a run to its first step event, ranks forked warm or started fresh;
- split point: the split-point experiment on a model whose later blocks are
  heavier (examples/heavy_later_blocks.py): the fastest split by step time and
  each split's step time relative to the balanced one.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.config import ExperimentConfig  # noqa: E402
from engine.results import Step  # noqa: E402
from engine.rules import effective_stages_per_device  # noqa: E402
from engine.run.session import RunSession  # noqa: E402


def run(config: ExperimentConfig, db: str, telemetry_hz: float = 10.0, label: str | None = None) -> dict:
    session = RunSession(config, db_path=db, telemetry_hz=telemetry_hz, label=label)
    session.start()
    result = session.wait()
    if result.status != "finished":
        raise RuntimeError(f"{config.strategy} run {result.status}: {result.error}")
    return result.summary


def step_times(summary) -> float:
    return summary.step_time_s.mean


def spread(summary) -> float:
    """A run's own step-to-step spread: the standard deviation of its measured steps over their mean."""
    return summary.step_time_s.std / summary.step_time_s.mean if summary.step_time_s.std else 0.0


def pipeline_vs_naive(db: str, shapes=((512, 8, 2048), (256, 8, 1024), (1024, 4, 1024)), steps=12) -> list[dict]:
    rows = []
    ideal = 2 * 4 / (4 + 2 - 1)
    for width, depth, batch in shapes:
        base = ExperimentConfig(model="mlp", width=width, depth=depth, batch_size=batch, steps=steps, warmup=3,
                                devices="cpu:2")
        naive = run(base.replace(strategy="model-parallel"), db)
        piped = run(base.replace(strategy="pipeline", micro_batches=4), db)
        speedup = step_times(naive) / step_times(piped)
        rows.append({"shape": f"mlp {width}x{depth}, batch {batch}", "naive_ms": step_times(naive) * 1000,
                     "pipeline_ms": step_times(piped) * 1000, "speedup": speedup, "efficiency": speedup / ideal,
                     "bubble_naive": naive.bubble.measured, "bubble_pipeline": piped.bubble.measured,
                     "split": piped.split, "stage_balance": piped.stage_balance})
    return rows


def bubble_table(db: str, micro_batches=(2, 4, 8), steps=12) -> list[dict]:
    """Measured against theoretical bubble: the naive split, and GPipe and 1F1B at each m (mlp 512x8, b 2048)."""
    base = ExperimentConfig(model="mlp", width=512, depth=8, batch_size=2048, steps=steps, warmup=3,
                            devices="cpu:2")
    rows = []
    naive = run(base.replace(strategy="model-parallel"), db)
    rows.append({"schedule": "naive", "m": 1, "measured": naive.bubble.measured,
                 "theory": naive.bubble.theory, "step_ms": step_times(naive) * 1000})
    for schedule in ("gpipe", "1f1b"):
        for m in micro_batches:
            piped = run(base.replace(strategy="pipeline", schedule=schedule, micro_batches=m), db)
            rows.append({"schedule": schedule, "m": m, "measured": piped.bubble.measured,
                         "theory": piped.bubble.theory, "step_ms": step_times(piped) * 1000})
    return rows


def schedule_table(db: str, m: int = 4, steps: int = 12) -> list[dict]:
    """Every schedule at m micro-batches on cpu:2 (mlp 512x8, batch 2048): measured bubble against its theory
    (None for the zero-bubble ones, which have no closed form), step time."""
    from engine.strategies.pipeline.schedules import SCHEDULE_LIST
    base = ExperimentConfig(model="mlp", width=512, depth=8, batch_size=2048, steps=steps, warmup=3,
                            devices="cpu:2", strategy="pipeline", micro_batches=m)
    rows = []
    for schedule in SCHEDULE_LIST:
        summary = run(base.replace(schedule=schedule.name), db)
        rows.append({"schedule": schedule.name, "v": effective_stages_per_device(base.replace(schedule=schedule.name)),
                     "measured": summary.bubble.measured, "theory": summary.bubble.theory,
                     "step_ms": step_times(summary) * 1000, "split": summary.split})
    return rows


PREDICTION_BASE = "what-if base"
"""The label of a prediction round's base run, ``what-if base BENCH/R``; its round's runs are ``what-if round
BENCH/R`` (BENCH: the ``prediction_error`` call's start, so that two in one store keep their rounds apart)."""


def prediction_error(db: str, counts=(2, 4, 8), steps: int = 12, rounds: int = 3) -> list[dict]:
    """Every schedule at each m (its default V) predicted from a GPipe m=4 run (engine.planner.what_if: the median
    step's), then run; ``rounds`` rounds of a base run and every setting in a shuffled order (seeded: the same
    each time): one run of a setting differs from the next by up to 20 % on this machine, as much as the errors
    looked for. With the base run first in every round, every schedule was predicted 3-11 % fast on a quiet
    machine (2026-12-05), the base's own setting run again included: the first run after a pause ran faster, an
    offset of the order, not of the model. The runs stay in ``db``, labelled by round, so that
    ``prediction_error_from`` can judge a change to the model on them again in seconds."""
    import random

    from engine.planner.what_if import candidates
    from engine.results import RunSummary
    base = ExperimentConfig(model="mlp", width=512, depth=8, batch_size=2048, steps=steps, warmup=3,
                            devices="cpu:2", strategy="pipeline")
    shape = RunSummary(batch_size=base.batch_size, micro_batches=4)
    chosen = [(schedule.name, v, m) for schedule, v, m in candidates(shape, 2, 1)
              if m in counts and v == effective_stages_per_device(base.replace(schedule=schedule.name))]
    order, bench = random.Random(0), time.strftime("%Y%m%d-%H%M%S")
    for index in range(rounds):
        plan = [*chosen, None]   # None: the base run
        order.shuffle(plan)
        for setting in plan:
            if setting is None:
                run(base.replace(micro_batches=4, schedule="gpipe"), db, label=f"{PREDICTION_BASE} {bench}/{index + 1}")
            else:
                run(base.replace(micro_batches=setting[2], schedule=setting[0]), db,
                    label=f"what-if round {bench}/{index + 1}")
    return prediction_error_from(db, bench)


def prediction_error_from(db: str, bench: str | None = None) -> list[dict]:
    """Each round's setting (``prediction_error``'s runs in ``db``, of every call or of the one started at ``bench``)
    predicted from its round's base run, against
    the median of the runs' median steps, per setting the median prediction; each row keeps every round's error,
    the runs' own spreads, the error without the base's measured split-backward cost (``split_backward_extra_s``,
    engine/strategies/pipeline/split_backward_probe.py, which only the zero-bubble schedules' predictions use) and the
    error against the same round's run of the base's own setting (``error_to_base_setting``: the base run's luck
    taken out)."""
    from engine.planner.what_if import predict
    from engine.store import Store
    from engine.strategies.pipeline.schedules import SCHEDULE_INFO, SCHEDULE_LIST
    with Store(db) as store:
        runs = sorted((r for r in store.list_runs()
                       if (r.label or "").startswith("what-if ") and r.status == "finished"), key=lambda r: r.started)
        rounds: dict[str, dict] = {}
        for record in runs:
            round_of = record.label.rpartition(" ")[2]   # BENCH/R
            if bench is not None and not round_of.startswith(f"{bench}/"):
                continue
            entry = rounds.setdefault(round_of, {"base": None, "runs": []})
            if record.label.startswith(PREDICTION_BASE):
                entry["base"] = record
            else:
                entry["runs"].append(record)
        settings: dict[tuple, dict] = {}
        for entry in rounds.values():
            ref = entry["base"]
            if ref is None:
                continue
            measured_steps = range(ref.config.warmup, ref.config.steps)
            rows_of_ref, times_of_ref = store.timeline(ref.id), store.step_times(ref.id, measured_steps)

            def by_key(summary, rows=rows_of_ref, times=times_of_ref, warmup=ref.config.warmup):
                return {(p.schedule, p.stages_per_device, p.micro_batches): p.step_time_s
                        for p in predict(summary, rows, warmup, step_times=times)}
            predicted, without_probe = by_key(ref.summary), by_key(ref.summary.replace(split_backward_extra_s=None))
            medians = {}
            for record in entry["runs"]:
                key = (record.config.schedule, effective_stages_per_device(record.config),
                       record.config.micro_batches)
                medians[key] = statistics.median(store.step_times(record.id, measured_steps))
            own_key = (ref.config.schedule, effective_stages_per_device(ref.config), ref.config.micro_batches)
            own = medians.get(own_key)
            for record in entry["runs"]:
                key = (record.config.schedule, effective_stages_per_device(record.config),
                       record.config.micro_batches)
                if key not in predicted:   # a base run the what-if cannot read (it says why in `main.py what-if`)
                    continue
                row = settings.setdefault(key, {"predicted": [], "without_probe": [], "measured": [], "to_base": [],
                                                "base_spread": [], "measured_spread": [], "base_split_extra_ms": [],
                                                "base_split_fixed_ms": []})
                row["predicted"].append(predicted[key])
                row["without_probe"].append(without_probe[key])
                row["measured"].append(medians[key])
                if own:   # the base's setting run again in the round: how far the base itself was from it
                    row["to_base"].append(predicted[key] / medians[key] * own / predicted[own_key] - 1)
                row["base_spread"].append(spread(ref.summary))
                row["measured_spread"].append(spread(record.summary))
                row["base_split_extra_ms"].append([round((x or 0.0) * 1000, 2)
                                                   for x in ref.summary.split_backward_extra_s or []])
                row["base_split_fixed_ms"].append([round((x or 0.0) * 1000, 2)
                                                   for x in ref.summary.split_backward_fixed_s or []])
    out = []
    for (schedule, v, m), row in settings.items():
        measured = statistics.median(row["measured"])
        out.append({"schedule": schedule, "v": v, "m": m, "predicted_ms": statistics.median(row["predicted"]) * 1000,
                    "measured_ms": measured * 1000, "error": statistics.median(row["predicted"]) / measured - 1,
                    "error_without_probe": statistics.median(row["without_probe"]) / measured - 1,
                    "error_to_base_setting": statistics.median(row["to_base"]) if row["to_base"] else None,
                    "round_errors": [p / m_ - 1 for p, m_ in zip(row["predicted"], row["measured"], strict=True)],
                    "measured_ms_each": [x * 1000 for x in row["measured"]],
                    "base_spread": max(row["base_spread"]), "measured_spread": max(row["measured_spread"]),
                    "base_split_extra_ms": row["base_split_extra_ms"],
                    "base_split_fixed_ms": row["base_split_fixed_ms"],
                    "splits_backward": SCHEDULE_INFO[schedule].splits_backward})
    order = [schedule.name for schedule in SCHEDULE_LIST]
    return sorted(out, key=lambda r: (order.index(r["schedule"]), r["m"]))


def _plain_pipeline_step_times(width, depth, batch, micro, steps, split, warmup) -> list[float]:
    """bench/plain_pipeline.py on two pinned processes; step times as the engine defines them."""
    import json
    import tempfile
    folder = tempfile.mkdtemp(prefix="splitscope-plain-")
    outs = [os.path.join(folder, f"rank{r}.json") for r in range(2)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "bench.plain_pipeline", str(r), "2",
                               os.path.join(folder, "store"), outs[r], *map(str, (width, depth, batch, micro, steps,
                                                                                 split))], cwd=ROOT, env=env)
             for r in range(2)]
    for proc in procs:
        if proc.wait(timeout=600):
            raise RuntimeError(f"plain pipeline script exited with {proc.returncode}")
    ends = [json.loads(Path(out).read_text()) for out in outs]
    last = [max(step) for step in zip(*ends, strict=True)]
    return [b - a for a, b in zip(last, last[1:], strict=False)][warmup - 1:]


def staged_overhead(db: str, shapes=((512, 8, 2048), (256, 8, 1024), (1024, 4, 1024)), steps=20, warmup=3,
                    rounds=3) -> list[dict]:
    """The engine's model-parallel and GPipe m=4 against a plain pipelining script, alternating rounds."""
    from engine.store import Store
    rows = []
    for width, depth, batch in shapes:
        split = (depth + 1) // 2
        for strategy, micro in (("model-parallel", 1), ("pipeline", 4)):
            config = ExperimentConfig(model="mlp", width=width, depth=depth, batch_size=batch, steps=steps,
                                      warmup=warmup, devices="cpu:2", split=(split,), strategy=strategy,
                                      micro_batches=micro if strategy == "pipeline" else None)
            plain_all, engine_all = [], []
            for _ in range(rounds):
                plain_all += _plain_pipeline_step_times(width, depth, batch, micro, steps, split, warmup)
                summary = run(config, db)
                with Store(db) as store:
                    engine_all += [s.time_s for s in store.steps(summary.run_id) if s.step >= warmup]
            plain, eng = statistics.median(plain_all), statistics.median(engine_all)
            rows.append({"shape": f"mlp {width}x{depth}, batch {batch}", "strategy": strategy, "m": micro,
                         "plain_ms": plain * 1000, "engine_ms": eng * 1000, "overhead": eng / plain - 1})
    return rows


PLAIN_LOOP = textwrap.dedent("""
    import os, sys, time, json
    sys.path.insert(0, {root!r})
    os.sched_setaffinity(0, {{0}})
    import torch
    torch.set_num_threads(1)
    from engine.config import ExperimentConfig
    from engine.models.build import build
    from engine.rules import effective_batch_size, effective_lr
    config = ExperimentConfig(model="mlp", width={width}, depth={depth}, batch_size={batch}, steps={steps})
    spec = build(config)
    model = spec.sequential()
    opt = torch.optim.SGD(model.parameters(), lr=effective_lr(config))
    batches = spec.data.batches(effective_batch_size(config))
    pool = [next(batches) for _ in range(min(16, config.steps))]  # prepared ahead, as the engine's default
    times = []
    for step in range(config.steps):
        t0 = time.perf_counter()
        x, y = pool[step % len(pool)]
        opt.zero_grad(set_to_none=True)
        loss = spec.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        float(loss)
        times.append(time.perf_counter() - t0)
    print(json.dumps(times[{warmup}:]))
""")


def engine_overhead(db: str, width=512, depth=4, batch=512, steps=30, warmup=3, rounds=3) -> dict:
    """Alternate plain and engine runs so machine noise hits both alike; compare medians."""
    import json
    plain_all, engine_all = [], []
    for _ in range(rounds):
        code = PLAIN_LOOP.format(root=str(ROOT), width=width, depth=depth, batch=batch, steps=steps, warmup=warmup)
        # The same thread settings the engine gives a rank, before torch is imported.
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=env).stdout
        plain_all.extend(json.loads(out))
        summary = run(ExperimentConfig(model="mlp", width=width, depth=depth, batch_size=batch, steps=steps,
                                       warmup=warmup, devices="cpu:1"), db)
        from engine.store import Store
        with Store(db) as store:
            engine_all.extend(s.time_s for s in store.steps(summary.run_id) if s.step >= warmup)
    plain, eng = statistics.median(plain_all), statistics.median(engine_all)
    return {"plain_ms": plain * 1000, "engine_ms": eng * 1000, "overhead": eng / plain - 1}


LAUNCH_CASES = {"seed-toy on cpu:1": dict(model="seed-toy", devices="cpu:1", steps=3, warmup=0),
                "ddp mlp 64x4 on cpu:2": dict(model="mlp", width=64, depth=4, batch_size=64, strategy="ddp",
                                              devices="cpu:2", steps=3, warmup=0)}


def _first_step_after(config: ExperimentConfig, db: str) -> float:
    first = threading.Event()
    session = RunSession(config, db_path=db, on_event=lambda e: isinstance(e, Step) and first.set())
    t0 = time.perf_counter()
    session.start()
    first.wait(120)
    latency = time.perf_counter() - t0
    session.wait()
    return latency


def launch_latency(db: str, repeats=3) -> dict:
    """Run start to first step event, ranks forked by a warm fork server (engine.forkserver) against started
    fresh (SPLITSCOPE_FORKSERVER=0), rounds alternated; and the first run of a process, whose server is
    still importing torch."""
    from engine import forkserver
    switch = forkserver.client.SWITCH_ENV
    results = {}
    cold = None
    for name, options in LAUNCH_CASES.items():
        config = ExperimentConfig(**options)
        fresh, forked = [], []
        for _ in range(repeats):
            os.environ[switch] = "0"
            try:
                fresh.append(_first_step_after(config, db))
            finally:
                os.environ.pop(switch)
            if cold is None:  # this process's first run with a server: it starts one and waits for its torch
                cold = _first_step_after(config, db)
            forked.append(_first_step_after(config, db))
        results[name] = {"fresh_s": statistics.median(fresh), "forked_s": statistics.median(forked),
                         "all_fresh_s": fresh, "all_forked_s": forked}
    results["first_run_s"] = cold
    return results


def sampling_cost(db: str, rounds: int = 5) -> dict:
    """Throughput with telemetry at 10 Hz against none, runs alternated so noise hits both alike."""
    config = ExperimentConfig(strategy="pipeline", model="mlp", width=512, depth=8, batch_size=1024, steps=12,
                              warmup=3, devices="cpu:2", micro_batches=4)
    off, on = [], []
    for _ in range(rounds):
        off.append(run(config, db, telemetry_hz=0).throughput.mean)
        on.append(run(config, db, telemetry_hz=10.0).throughput.mean)
    return {"off": statistics.median(off), "on": statistics.median(on),
            "ratio": statistics.median(on) / statistics.median(off)}


def split_point_finding(db: str, repeats: int = 3) -> dict:
    """The split-point preset, as a user runs it, on blocks costing 1, 1, 1, 1, 2, 2 (balanced: split 4)."""
    from engine.experiments import ExperimentRunner
    base = ExperimentConfig(model_file=str(ROOT / "examples" / "heavy_later_blocks.py"), devices="cpu:2",
                            batch_size=512, micro_batches=4, steps=8)
    result = ExperimentRunner("split-point", base, repeats=repeats, db_path=db).run()
    points = {p.label: p for p in result.points if p.step_time_s}
    balanced = points["split 4"].step_time_s.mean
    return {"best": result.best, "automatic_split": result.automatic_split,
            "relative": {label: p.step_time_s.mean / balanced for label, p in points.items()},
            "stage_balance": {label: p.stage_balance for label, p in points.items()}}


def print_predictions(rows: list[dict]) -> None:
    rounds = max((len(r["round_errors"]) for r in rows), default=0)
    print(f"what-if predictions from a GPipe m=4 run (cpu:2, mlp 512x8, batch 2048) against runs, {rounds} rounds in "
          "a shuffled order, medians:", flush=True)
    for r in rows:
        to_base = r["error_to_base_setting"]
        print(f"  {r['schedule']:<16} V={r['v']} m={r['m']}: predicted {r['predicted_ms']:.0f} ms, measured "
              f"{r['measured_ms']:.0f} ms, error {r['error']:+.1%} (rounds "
              f"{', '.join(f'{e:+.1%}' for e in r['round_errors'])}; against the round's run of the base's own "
              f"setting {'n/a' if to_base is None else f'{to_base:+.1%}'}; without the split-backward probe "
              f"{r['error_without_probe']:+.1%}; largest spread of a base run ±{r['base_spread']:.1%}, "
              f"of a run of this setting ±{r['measured_spread']:.1%})", flush=True)


def main(db: str | None = None) -> dict:
    import tempfile
    db = db or str(Path(tempfile.mkdtemp()) / "bench.sqlite3")
    results = {}
    print("launch latency (run start -> first step event; medians of 3 alternating rounds):", flush=True)
    results["launch"] = launch = launch_latency(db)
    for name in LAUNCH_CASES:
        r = launch[name]
        print(f"  {name}: fresh processes {r['fresh_s']:.2f} s, forked by the fork server {r['forked_s']:.2f} s "
              f"({r['fresh_s'] / r['forked_s']:.1f}x)", flush=True)
    print(f"  the process's first run, its fork server still importing torch: {launch['first_run_s']:.2f} s",
          flush=True)
    print("engine overhead (single vs a plain loop, mlp 512x4 batch 512, one pinned thread):", flush=True)
    results["overhead"] = engine_overhead(db)
    o = results["overhead"]
    print(f"  plain {o['plain_ms']:.1f} ms/step, engine {o['engine_ms']:.1f} ms/step: {o['overhead']:+.1%}", flush=True)
    print("throughput with telemetry sampling at 10 Hz vs off (pipeline on cpu:2, mlp 512x8 batch 1024):",
          flush=True)
    results["sampling"] = sampling_cost(db)
    print(f"  on/off = {results['sampling']['ratio']:.3f} ({results['sampling']['on']:.0f} vs "
          f"{results['sampling']['off']:.0f} samples/s, medians)", flush=True)
    print("pipeline (gpipe, 4 micro-batches) vs naive model-parallel on cpu:2, ideal speedup 1.6:", flush=True)
    results["pipeline"] = pipeline_vs_naive(db)
    for r in results["pipeline"]:
        print(f"  {r['shape']}: naive {r['naive_ms']:.0f} ms, pipeline {r['pipeline_ms']:.0f} ms, speedup "
              f"{r['speedup']:.2f} = {r['efficiency']:.2f} of ideal (bubble {r['bubble_naive']:.2f} -> "
              f"{r['bubble_pipeline']:.2f}; split {r['split']}, stage balance {r['stage_balance']:.2f})",
              flush=True)
    print("measured vs theoretical bubble on cpu:2 (mlp 512x8, batch 2048):", flush=True)
    results["bubbles"] = bubble_table(db)
    for r in results["bubbles"]:
        print(f"  {r['schedule']:<6} m={r['m']}: measured {r['measured']:.3f}, theory {r['theory']:.3f}, "
              f"step {r['step_ms']:.0f} ms", flush=True)
    print("every schedule on cpu:2, m=4 (mlp 512x8, batch 2048): measured vs theoretical bubble, step time:",
          flush=True)
    results["schedules"] = schedule_table(db)
    for r in results["schedules"]:
        theory = f"{r['theory']:.3f}" if r["theory"] is not None else "none (zero bubble)"
        print(f"  {r['schedule']:<16} V={r['v']}: measured {r['measured']:.3f}, theory {theory}, step "
              f"{r['step_ms']:.0f} ms (split {r['split']})", flush=True)
    results["predictions"] = prediction_error(db)
    print_predictions(results["predictions"])
    print("engine overhead of the staged strategies vs a plain torch.distributed.pipelining script (cpu:2, "
          "same split, prepared batches, pinning; 3 alternating rounds, medians):", flush=True)
    results["staged_overhead"] = staged_overhead(db)
    for r in results["staged_overhead"]:
        print(f"  {r['shape']}, {r['strategy']} m={r['m']}: plain {r['plain_ms']:.1f} ms, engine "
              f"{r['engine_ms']:.1f} ms: {r['overhead']:+.1%}", flush=True)
    print("split-point experiment, blocks costing 1,1,1,1,2,2 (balanced split 4), pipeline m=4 on cpu:2, "
          "3 repeats:", flush=True)
    results["split_point"] = sp = split_point_finding(db)
    print(f"  fastest {sp['best']}, automatic split {sp['automatic_split']}; step time / split 4's: "
          + ", ".join(f"{label} {ratio:.2f}" for label, ratio in sp["relative"].items()), flush=True)
    print("  stage balance: " + ", ".join(f"{label} {b:.2f}" for label, b in sp["stage_balance"].items()
                                         if b is not None), flush=True)
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--predictions-from"]:   # judge a change to the what-if on a bench's stored runs again
        if len(sys.argv) != 3 or not os.path.isfile(sys.argv[2]):
            sys.exit("usage: python -m bench.engine_bench --predictions-from STORE (a bench's run store, which exists)")
        print_predictions(prediction_error_from(sys.argv[2]))
    else:
        main()
