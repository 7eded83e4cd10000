"""``main.py advise``: the best way to spread a model over the devices (docs/advise.md).

    python main.py advise [model options as for run] --devices ... [--batch-size B] [--memory-limit BYTES|auto]
                          [--budget-s S] [--db DB] [--json]

Bad input is said in one line each, before anything launches (exit 2): the options, devices of mixed kinds, a
batch too small to spread, and (after the probe, before any run) a model that fits no candidate's memory.
Then the probe's child ranks every candidate (engine/advise/ranking.py), the best few are checked by short
runs (engine/advise/verify.py), and the advice is printed (engine/advise/advice.py): a summary, or with
``--json`` one object {"choice", "run_args", "predicted_step_s", "measured_step_s", "candidates", "elapsed_s"}.
"""
from __future__ import annotations

import dataclasses
import math
import re
import signal
import sys
import threading
import time
from collections.abc import Callable

from engine import devices as devices_mod, rules
from engine.advise.advice import CHOSEN, advice, model_args, other_args
from engine.advise.results import Advice, Ranked
from engine.config import ConfigError, ExperimentConfig, Problem
from engine.run_options import add_run_options, given_options
from engine.wire import advise as wire, codec

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
DEFAULT_BUDGET_S = 60.0
SHOWN = 15   # candidates in the text's table (--json lists all)
_UNITS = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tib": 1 << 40}


def add_parser(sub) -> None:
    advise = sub.add_parser("advise", help="the best way to spread a model over the devices: every candidate "
                                           "predicted from one probe of the model and the devices, the best few "
                                           "checked by short runs")
    advise.add_argument("--memory-limit", default="auto",
                        help="bytes each device may hold (2147483648, 2GiB, 512MiB), or auto: a GPU's free memory, "
                             "or this machine's available memory shared by the CPU devices (default auto)")
    advise.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help=f"seconds the checking runs may take in all (default {DEFAULT_BUDGET_S:g}); the "
                             "probes come before them")
    add_run_options(advise, leave_out=CHOSEN)


def memory_limit_bytes(text: str) -> int | None:
    """``--memory-limit``: bytes, None for auto; ValueError saying what is allowed."""
    if text.strip().lower() == "auto":
        return None
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = _UNITS.get(found.group(2).lower()) if found else None
    if unit is None or float(found.group(1)) * unit < 1:
        raise ValueError(f"must be a number of bytes (2147483648, 2GiB, 512MiB) or auto, got {text!r}")
    return int(float(found.group(1)) * unit)


def input_problems(args) -> tuple[ExperimentConfig | None, int | None, list[str]]:
    """The base config and memory limit, or the lines saying what is wrong with the input (nothing launched)."""
    lines = []
    limit = None
    try:
        limit = memory_limit_bytes(args.memory_limit)
    except ValueError as exc:
        lines.append(f"--memory-limit: {exc}")
    if not 0 < args.budget_s < math.inf:
        lines.append(f"--budget-s: must be more than 0 seconds, got {args.budget_s:g}")
    if not 0 < args.telemetry_hz <= 50:
        lines.append(f"--telemetry-hz: must be more than 0 and at most 50, got {args.telemetry_hz:g}")
    values = given_options(args)
    if args.model and args.model_file:
        lines.append("--model: give either --model or --model-file, not both")
    values["model"] = values.get("model") or "mlp"
    try:
        config = ExperimentConfig(**values)
    except (ConfigError, TypeError) as exc:
        return None, None, lines + [str(p) for p in getattr(exc, "problems", [Problem("config", str(exc))])]
    lines += [str(p) for p in rules.problems(config)]
    if lines:
        return None, None, lines
    try:
        devices = devices_mod.parse(config.devices, 2)
    except devices_mod.DeviceError as exc:
        return None, None, [f"--devices: {exc}"]
    kinds = sorted({d.kind for d in devices})
    if len(kinds) > 1:
        return None, None, [f"--devices: advise compares ways to spread a model over devices of one kind; "
                            f"{', '.join(d.name for d in devices)} mixes {' and '.join(kinds)}"]
    if len({d.name for d in devices}) < len(devices):
        return None, None, [f"--devices: each device once, got {config.devices}"]
    batch = rules.effective_batch_size(config)
    if batch < len(devices):
        return None, None, [f"--batch-size: a batch of {batch} cannot be spread over {len(devices)} devices (no "
                            "candidate would give each device a sample or cut it into micro-batches); give at least "
                            f"{len(devices)}"]
    return config, limit, []


def cmd_advise(args, store_usable: Callable[[str | None], bool]) -> int:
    """``store_usable(db)``: the command line's check that runs can be recorded (it says why not)."""
    started = time.perf_counter()
    config, limit, lines = input_problems(args)
    if lines:
        for line in lines:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_INVALID
    if not store_usable(args.db):
        return EXIT_INVALID
    from engine.advise import verify
    from engine.advise.ranking import rank_in_child
    say = (lambda text: print(text, file=sys.stderr, flush=True))
    say(f"advise: probing {rules.model_label(config)} and {config.devices} ...")
    ranking = rank_in_child(config, limit)
    if ranking.problems:
        for line in ranking.problems:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_INVALID
    if not ranking.candidates:
        print(f"error: --devices: no way to run {rules.model_label(config)} on {config.devices} was found",
              file=sys.stderr)
        return EXIT_INVALID
    if not any(r.prediction.fits for r in ranking.candidates):
        least = min(ranking.candidates, key=lambda r: r.prediction.memory_bytes)
        print(f"error: --memory-limit: no candidate fits {_bytes(ranking.memory_limit_bytes)} a device "
              f"({ranking.memory_limit_source}); the least, {least.label}, needs "
              f"{_bytes(least.prediction.memory_bytes)}",
              file=sys.stderr)
        return EXIT_INVALID
    say(f"advise: {len(ranking.candidates)} candidates predicted; checking the best "
        f"{min(verify.CHECKED, sum(r.prediction.fits for r in ranking.candidates))} within {args.budget_s:g} s")
    stop, sessions = threading.Event(), []

    def request_stop(*_):
        stop.set()
        for session in list(sessions):
            session.stop()
    old = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        checks = verify.check(ranking.candidates, config, args.budget_s, db_path=args.db,
                              telemetry_hz=args.telemetry_hz, on_progress=lambda text: say(f"advise: {text}"),
                              stop=stop, sessions=sessions)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    result = advice(ranking, checks, config, time.perf_counter() - started)
    print(codec.dumps(advice_json(result), compact=False) if args.json else advice_text(result, config))
    return EXIT_OK


def advise_args(config: ExperimentConfig) -> list[str]:
    """``main.py advise``'s arguments (after ``advise``) for ``config``'s model, devices, batch and other options,
    leaving out what advise chooses itself (the strategy, split, schedule, steps): the app's Advise asks with its
    form's config (app/controllers/advise_flow.py)."""
    batch = ["--batch-size", str(config.batch_size)] if config.batch_size is not None else []
    return [*model_args(config), "--devices", config.devices, *batch, *other_args(config)]


def candidate_row(entry: Ranked, batch_size: int) -> wire.CandidateRow:
    c, p, m = entry.candidate, entry.prediction, entry.measured
    return wire.CandidateRow(
        label=entry.label, strategy=c.strategy, devices=c.devices, split=c.split, schedule=c.schedule,
        micro_batches=c.micro_batches, stages_per_device=c.stages_per_device, predicted_step_s=p.step_s,
        predicted_throughput=p.throughput(batch_size), measured_step_s=m.step_s if m else None,
        measured_std_s=m.step_std_s if m else None, measured_throughput=m.throughput if m else None,
        run_id=m.run_id if m else None, disturbed=m.disturbed if m else None, check_error=m.error if m else None,
        prediction_error=entry.prediction_error, bubble=p.bubble, compute_s=p.compute_s,
        communication_s=p.communication_s, memory_bytes=p.memory_bytes, fits=p.fits, why=p.why)


def candidate_json(entry: Ranked, batch_size: int) -> dict:
    return dataclasses.asdict(candidate_row(entry, batch_size))


def advice_json(result: Advice) -> dict:
    """The issue's shape (engine/wire/advise.py AdviceAnswer): {"choice", "run_args", "predicted_step_s",
    "measured_step_s", "candidates", "elapsed_s"}; the choice with its runner-up, ties, reasons and notes."""
    choice = result.choice
    row = wire.ChoiceRow(**{**vars(candidate_row(choice, result.batch_size)), "why": result.why},
                         runner_up=result.runner_up.label if result.runner_up else None, tied=result.tied,
                         notes=result.notes, memory_limit_bytes=result.memory_limit_bytes,
                         memory_limit_source=result.memory_limit_source, probe_s=result.probe_s,
                         check_s=result.check_s)
    return dataclasses.asdict(wire.AdviceAnswer(
        choice=row, run_args=result.run_args, predicted_step_s=choice.prediction.step_s,
        measured_step_s=choice.measured.step_s if choice.measured else None,
        candidates=[candidate_row(r, result.batch_size) for r in result.candidates], elapsed_s=result.elapsed_s))


def advice_text(result: Advice, config: ExperimentConfig) -> str:
    batch = result.batch_size
    fitting = sum(r.prediction.fits for r in result.candidates)
    lines = [f"advise: {rules.model_label(config)} on {config.devices}, batch {batch}: {len(result.candidates)} "
             f"candidates predicted, {fitting} fit {_bytes(result.memory_limit_bytes)} a device "
             f"({result.memory_limit_source}); {len(result.checked)} checked in {result.check_s:.1f} s, "
             f"{result.elapsed_s:.1f} s in all",
             f"choice: {_summary(result.choice, batch)}"]
    if result.runner_up is not None:
        lines.append(f"runner-up: {_summary(result.runner_up, batch)}")
    lines.append(f"why: {result.why}")
    lines += [f"note: {note}" for note in result.notes]
    lines.append("run it: python main.py run " + " ".join(_quoted(a) for a in result.run_args))
    lines.append("")
    lines.append(f"{'#':>3}  {'candidate':<34} {'pred ms':>9} {'meas ms':>14} {'samples/s':>10} {'bubble':>6} "
                 f"{'comm ms':>8} {'memory':>10}  fits")
    for k, r in enumerate(result.candidates[:SHOWN], 1):
        p, m = r.prediction, r.measured
        measured = f"{m.step_s * 1e3:.3g} ±{(m.step_std_s or 0) * 1e3:.2g}" if m and m.step_s else \
            ("failed" if m else "")
        rate = m.throughput if m and m.throughput else p.throughput(batch)
        lines.append(f"{k:>3}  {r.label:<34} {p.step_s * 1e3:>9.3g} {measured:>14} {rate:>10,.0f} "
                     f"{p.bubble:>6.0%} {p.communication_s * 1e3:>8.3g} {_bytes(p.memory_bytes):>10}  "
                     f"{'yes' if p.fits else 'no'}")
    if len(result.candidates) > SHOWN:
        lines.append(f"(the first {SHOWN} of {len(result.candidates)}; --json lists every one)")
    lines.append("samples/s: measured where checked, else predicted; bubble and comm ms: predicted")
    return "\n".join(lines)


def _summary(entry: Ranked, batch: int) -> str:
    p, m = entry.prediction, entry.measured
    text = f"{entry.label} ({entry.candidate.devices}): predicted {p.step_s * 1e3:.3g} ms a step " \
           f"({p.throughput(batch):,.0f} samples/s)"
    if m and m.step_s:
        text += f", measured {m.step_s * 1e3:.3g} ms ±{(m.step_std_s or 0) * 1e3:.2g} ({m.throughput:,.0f} samples/s)"
    elif m and m.error:
        text += f", its check failed: {m.error}"
    return text


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def _quoted(arg: str) -> str:
    import shlex
    return shlex.quote(arg)
