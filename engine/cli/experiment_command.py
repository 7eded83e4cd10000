"""``experiment``: a preset's runs over a base config the options make."""
from __future__ import annotations

import signal
import sys

from engine.cli.parser import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from engine.config import ConfigError, ExperimentConfig, Problem
from engine.results import to_json
from engine.run_options import given_options, split_tokens
from engine.wire import codec


def experiment_base(args) -> ExperimentConfig:
    from engine.experiments import default_config
    from engine.run.validate import check_all
    explicit = given_options(args)
    found = []
    tokens = None
    if "split" in explicit:
        try:
            tokens = split_tokens(explicit.pop("split"))
        except ConfigError as exc:
            found.extend(exc.problems)
    if args.repeats < 1:
        found.append(Problem("repeats", f"must be at least 1, got {args.repeats}"))
    if found:
        raise ConfigError(found)
    base = default_config(explicit)
    if tokens is None:
        return base
    if all(isinstance(t, int) for t in tokens):
        return base.replace(split=tuple(tokens))  # no names to look up: no child needed
    (checked,) = check_all([(base, tokens)], names_only=True)  # names need the model's blocks
    if checked.problems:
        raise ConfigError(checked.problems)
    return checked.config


def cmd_experiment(args) -> int:
    from engine.experiments import PRESETS, ExperimentRunner
    if args.name not in PRESETS:
        print(f"error: unknown experiment {args.name!r}; allowed: {', '.join(PRESETS)}", file=sys.stderr)
        return EXIT_INVALID
    try:
        base = experiment_base(args)  # a template for the points, not a run of its own
    except (ConfigError, TypeError) as exc:
        problems = getattr(exc, "problems", None) or [Problem("config", str(exc))]
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        return EXIT_INVALID
    try:
        runner = ExperimentRunner(args.name, base, repeats=args.repeats, db_path=args.db,
                                  telemetry_hz=args.telemetry_hz,
                                  on_progress=lambda k, n, label: print(f"run {k} of {n}: {label}", file=sys.stderr,
                                                                        flush=True))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    # Every point must be valid before the first run starts (one check for all of them).
    from engine.run.validate import check_all
    bad = [(p.label, checked.problems) for p, checked in
           zip(runner.points, check_all([(p.config, None) for p in runner.points]), strict=True) if checked.problems]
    if bad:
        for label, problems in bad:
            for problem in problems:
                print(f"error: {label}: {problem}", file=sys.stderr)
        return EXIT_INVALID
    old = {s: signal.signal(s, lambda *_: runner.stop()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = runner.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if args.json:
        print(codec.dumps(to_json(result), compact=False))
    else:
        from engine.cli.report import experiment_table
        print(experiment_table(result))
    return EXIT_OK if result.status == "finished" and result.measured else EXIT_FAILED
