"""The command line: run, runs, devices, experiment, export (README, "Command line").

Exit status: 0 finished, 1 the run failed or was stopped, 2 invalid input
(nothing launched; one line per problem on stderr naming the option).
No Qt is imported here: the CLI runs on machines without a display.
"""
from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
import threading

from engine.config import ConfigError, ExperimentConfig, Problem
from engine.nodes.token import DEFAULT_TEXT as TOKEN_DEFAULT
from engine.results import to_json
from engine.rules import effective_batch_size, watches_script
from engine.run_options import add_run_options, config_from_args, given_options, split_tokens
from engine.wire import codec

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
# build_parser's subcommands, in its order
COMMANDS = ("run", "runs", "experiment", "export", "what-if", "models", "devices", "recover", "node", "watch",
            "trace", "advise")


class ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad options our way (exit 2, a line naming the option) instead of exiting."""

    def error(self, message):
        raise ArgumentError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="main.py", description="Splitscope: see how training spreads over devices.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="one run, no display needed")
    add_run_options(run)
    runs = sub.add_parser("runs", help="stored runs, newest first")
    runs.add_argument("--json", action="store_true")
    runs.add_argument("--db", default=None)
    runs.add_argument("--limit", type=int, default=None)
    experiment = sub.add_parser("experiment", help="a preset comparison: " + ", ".join(_preset_names()))
    experiment.add_argument("name", help="; ".join(f"{n}: {d}" for n, d in _preset_names().items()))
    experiment.add_argument("--repeats", type=int, default=3, help="runs per point (default 3)")
    add_run_options(experiment, for_experiment=True)
    from engine.export import FORMATS  # no Qt; matplotlib only once a file is drawn
    export = sub.add_parser("export", help="a run's or experiment's plots as png, svg, pdf, csv, or one html report")
    export.add_argument("id", help="a run id or an experiment id (see `runs`)")
    export.add_argument("--format", required=True, choices=FORMATS,
                        help="png, svg, pdf: the figures drawn; csv: the tables behind them; html: one report "
                             "with both (all but csv and trace draw with matplotlib); trace: a run's timeline and "
                             "telemetry as Chrome Trace Event JSON, for Perfetto (ui.perfetto.dev) or "
                             "chrome://tracing")
    export.add_argument("--out", required=True,
                        help="a folder for png/svg/pdf/csv (a file per figure); a file for html and trace")
    export.add_argument("--force", action="store_true", help="overwrite existing files")
    export.add_argument("--db", default=None)
    what_if = sub.add_parser("what-if", help="a stored run's what-if: every pipeline schedule, micro-batch count and "
                                             "stages per device, simulated from its timeline")
    what_if.add_argument("id", help="a run id (see `runs`): a pipeline or model-parallel run")
    what_if.add_argument("--json", action="store_true")
    what_if.add_argument("--db", default=None)
    listing = sub.add_parser("models", help="the models to choose from, or one model's split points")
    listing.add_argument("--torchvision", action="store_true", help="list torchvision's classification models")
    listing.add_argument("--model", default=None, help="show this model's split points, timed")
    listing.add_argument("--model-file", default=None, help="show this file's model's split points, timed")
    listing.add_argument("--split-level", type=int, default=1, help="as for run")
    listing.add_argument("--image-size", type=int, default=None, help="as for run")
    listing.add_argument("--batch-size", type=int, default=None, help="as for run")
    listing.add_argument("--stages", type=int, default=2, help="stages of the balanced split shown (default 2)")
    listing.add_argument("--json", action="store_true")
    devices = sub.add_parser("devices", help="GPUs and CPU virtual devices")
    devices.add_argument("--json", action="store_true")
    from engine.store.command import add_recover_command
    add_recover_command(sub)
    node = sub.add_parser("node", help="serve runs from coordinators on other machines (`run --nodes`) until "
                                       "Ctrl-C: a node agent")
    node.add_argument("--listen", default=None, help="ADDR:PORT to listen on: this machine's address on the network "
                                                     "the nodes share (the agent listens on it alone)")
    node.add_argument("--token-file", default=None,
                      help=f"the file holding the token every node and coordinator shares (default: {TOKEN_DEFAULT}); "
                           "only its owner may read it")
    node.add_argument("--allow", default=None,
                      help="addresses or networks coordinators may connect from, e.g. 10.0.0.1 or 10.0.0.0/24 "
                           "(default: the subnet of --listen)")
    node.add_argument("--allow-scripts", action="store_true",
                      help="also run users' own training scripts sent by `watch --nodes` (the script's text "
                           "travels with the run; it runs as this agent's user)")
    node.add_argument("--new-token", default=None, metavar="FILE",
                      help="write a new random token to FILE (readable by you alone), then exit")
    from engine.watch.command import add_parser as add_watch_command
    add_watch_command(sub)
    from engine.traces.command import add_parser as add_trace_command
    add_trace_command(sub)
    from engine.advise.command import add_parser as add_advise_command
    add_advise_command(sub)
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except ArgumentError as exc:
        # argparse quotes the user's words as they are: keep one problem on one line.
        print("error: " + " ".join(str(exc).splitlines()), file=sys.stderr)
        return EXIT_INVALID
    from engine.store.command import location_error, store_notices, store_problem
    if hasattr(args, "db"):   # a command that opens the store: a path that cannot hold one is bad input
        problem = location_error(args.db, args.command)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return EXIT_INVALID
    # Checks that build a model run in a child (engine/run/validate.py): a model file that never returns is ended
    # there, at the hang timeout, and this process, which supervises the run, never holds torch.
    from engine.run.validate import validate_in_child
    before = validate_in_child(True)
    try:
        return _dispatch(args, parser)
    except sqlite3.Error as exc:   # the run store: damaged (set aside), gone or unreadable; never a traceback
        print(f"error: {store_problem(exc, getattr(args, 'db', None))}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        validate_in_child(before)   # main() called in a test's process leaves it as it was
        store_notices()   # what opening the store found lost (a deleted log), said once


def _dispatch(args, parser) -> int:
    if args.command == "recover":
        from engine.store.command import cmd_recover
        return cmd_recover(args)
    if args.command == "node":
        from engine.nodes.command import cmd_node
        return cmd_node(args)
    if args.command == "trace":   # a job's profiler traces read (engine/traces)
        from engine.traces.command import cmd_trace
        return cmd_trace(args)
    if args.command == "advise":   # the best way to spread a model over the devices (engine/advise)
        from engine.advise.command import cmd_advise
        return cmd_advise(args, store_usable)
    if args.command == "watch":   # run's short way for --strategy script
        from engine.watch.command import NAMES, watch_config
        config, _ = validate_or_report(lambda: watch_config(args), NAMES)
        if config is None or not store_usable(args.db) or not nodes_usable(config):
            return EXIT_INVALID
        return cmd_run_validated(config, args)
    commands = {"run": cmd_run, "runs": cmd_runs, "models": cmd_models, "devices": cmd_devices,
                "experiment": cmd_experiment, "export": cmd_export, "what-if": cmd_what_if}
    if args.command in commands:
        return commands[args.command](args)
    parser.print_help(sys.stderr)
    return EXIT_INVALID


# ---- run ------------------------------------------------------------------------
def validate_or_report(config_factory, names: dict[str, str] | None = None) -> tuple[ExperimentConfig | None, object]:
    """The checked config and its plan, or None after printing every problem (exit 2). ``names``: how this
    command names an option where it is not `run`'s flag (watch's SCRIPT)."""
    from engine.run.validate import check_all

    def said(p) -> str:
        return f"{names[p.option]}: {p.message}" if names and p.option in names else str(p)
    try:
        config, tokens = config_factory()
    except ConfigError as exc:
        for p in exc.problems:
            print(f"error: {said(p)}", file=sys.stderr)
        return None, None
    (checked,) = check_all([(config, tokens)])
    if checked.problems:
        for p in checked.problems:
            print(f"error: {said(p)}", file=sys.stderr)
        return None, None
    for w in checked.plan.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return checked.config, checked.plan


def cmd_run(args) -> int:
    config, _ = validate_or_report(lambda: config_from_args(args))
    if config is None or not store_usable(args.db) or not nodes_usable(config):
        return EXIT_INVALID
    return cmd_run_validated(config, args)


def nodes_usable(config: ExperimentConfig) -> bool:
    """With --nodes, every agent answers, proves the token and has the devices, before anything launches."""
    if not config.nodes:
        return True
    from engine.nodes.coordinator import preflight
    problems = preflight(config)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return not problems


def store_usable(db) -> bool:
    """Open the store before launching: a read-only or missing location is bad input, not a failed run."""
    from engine.store import StoreDamaged, open_store
    from engine.store.command import read_only_problem
    read_only = read_only_problem(db, "a run cannot be recorded in it")
    if read_only:
        print(f"error: {read_only}", file=sys.stderr)
        return False
    try:
        with open_store(db) as store:
            store.check_writable()
        return True
    except StoreDamaged:
        raise   # said by main, with what was done about it
    except (sqlite3.Error, OSError) as exc:
        from engine.store import default_path
        print(f"error: --db: cannot write the run store at {db or default_path()}: {exc}", file=sys.stderr)
        return False


def cmd_run_validated(config: ExperimentConfig, args) -> int:
    from engine.run.progress import Progress
    from engine.run.session import RunSession
    progress = Progress(config.steps, enabled=True)
    session = RunSession(config, db_path=args.db, telemetry_hz=args.telemetry_hz, on_event=progress.on_event)
    # Ctrl-C or SIGTERM: stop the run in order (the worker has its own session).
    stop_once = threading.Event()

    def request_stop(*_):
        if not stop_once.is_set():
            stop_once.set()
            print("\nstopping...", file=sys.stderr)
            session.stop()
    old = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        session.start()
        while session.wait(0.2) is None:
            pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    result = session.result
    progress.close()
    if result.error:
        if result.traceback and watches_script(config):
            # a watched script's own error: its traceback, as python would have printed it
            print(result.traceback.rstrip(), file=sys.stderr)
        print(f"error: {result.error}", file=sys.stderr)
    predictions = _predictions(result, args.db) if result.status == "finished" else []
    if args.json:
        out = (to_json(result.summary) if result.summary is not None else
               {"run_id": result.run_id, "status": result.status, "error": result.error})
        if predictions:
            out["predictions"] = [to_json(p) for p in predictions]
        print(codec.dumps(out, compact=False))
    else:
        from engine.report import predictions_table, summary_table
        if result.summary:
            print(summary_table(result.summary))
            if predictions:
                print(predictions_table(predictions, under_run=result.run_id))
        else:
            print(f"run {result.run_id}: {result.status}")
    return EXIT_OK if result.status == "finished" else EXIT_FAILED


def _predictions(result, db) -> list:
    """What-if step times of GPipe and 1F1B at other micro-batch counts, from this run (engine.plan.what_if): torch-
    free, so `run` stays quick; every schedule is `what-if RUN_ID`'s. A prediction that fails costs the run
    nothing: the run is stored and reported without it."""
    from engine.plan.what_if import predict_stored
    from engine.store import open_store
    try:
        with open_store(db) as store:
            return predict_stored(store, result.run_id, multi_stage=False)
    except (ValueError, ArithmeticError) as exc:
        print(f"warning: no what-if for run {result.run_id}: {exc}", file=sys.stderr)
        return []


def cmd_what_if(args) -> int:
    from engine.plan.what_if import predict_stored, unpredictable
    from engine.report import predictions_table
    from engine.store.command import open_for_reading
    with open_for_reading(args.db) as store:
        record = store.get_run(args.id)
        if record is None:
            print(f"error: no run {args.id!r} in {store.path} (see `runs`)", file=sys.stderr)
            return EXIT_INVALID
        if record.status != "finished" or record.summary is None:
            print(f"error: run {args.id} {record.status}; what-if needs a finished run", file=sys.stderr)
            return EXIT_INVALID
        why = unpredictable(record.summary)
        if why:
            print(f"error: {why}", file=sys.stderr)
            return EXIT_INVALID
        predictions = predict_stored(store, args.id)
    if not predictions and not args.json:
        print(f"no what-if for run {args.id}: none of its kept steps is past its warm-up", file=sys.stderr)
        return EXIT_FAILED
    print(codec.dumps([to_json(p) for p in predictions], compact=False) if args.json
          else predictions_table(predictions, summary=record.summary))
    return EXIT_OK


# ---- experiment ---------------------------------------------------------------------
def _preset_names() -> dict[str, str]:
    from engine.experiments import PRESETS
    return {name: p.description for name, p in PRESETS.items()}


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
        from engine.report import experiment_table
        print(experiment_table(result))
    return EXIT_OK if result.status == "finished" and result.measured else EXIT_FAILED


# ---- export ---------------------------------------------------------------------------
def cmd_export(args) -> int:
    from engine.export import ExportError, export
    from engine.store.command import open_for_reading
    try:
        with open_for_reading(args.db) as store:
            paths = export(store, args.id, args.format, args.out, force=args.force)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print("\n".join(map(str, paths)))
    return EXIT_OK


# ---- runs and devices ---------------------------------------------------------
def cmd_runs(args) -> int:
    from engine.report import runs_table
    from engine.store.command import open_for_reading
    with open_for_reading(args.db) as store:
        runs = store.list_runs(limit=args.limit)
    if args.json:
        print(codec.dumps([r.to_dict() for r in runs], compact=False, finite=True))
    else:
        print(runs_table(runs))
    return EXIT_OK


def cmd_models(args) -> int:
    from engine.plan import model_listing
    if args.torchvision:
        rows = model_listing.torchvision_rows()
        print(codec.dumps(rows, compact=False) if args.json else model_listing.torchvision_text(rows))
        return EXIT_OK
    if not (args.model or args.model_file):
        rows = model_listing.builtin_rows()
        print(codec.dumps(rows, compact=False) if args.json else model_listing.builtin_text(rows))
        return EXIT_OK
    config = ExperimentConfig(model=args.model or "custom", batch_size=args.batch_size,
                              model_file=os.path.abspath(args.model_file) if args.model_file else None,
                              split_level=args.split_level, image_size=args.image_size)
    from engine.run.validate import check_all
    (checked,) = check_all([(config, None)])
    if checked.problems:
        for p in checked.problems:
            print(f"error: {p}", file=sys.stderr)
        return EXIT_INVALID
    if args.stages < 2:
        print(f"error: --stages: must be at least 2, got {args.stages}", file=sys.stderr)
        return EXIT_INVALID
    from engine.models.tracing import TraceError
    try:
        rows, split = model_listing.split_point_rows(config, args.stages)
    except (TraceError, ValueError) as exc:
        print(f"error: {'--model-file' if args.model_file else '--model'}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(codec.dumps({"split_points": rows, "balanced_split": list(split)}, compact=False))
    else:
        print(model_listing.split_points_text(rows, split, effective_batch_size(config), config.split_level))
    return EXIT_OK


def cmd_devices(args) -> int:
    from engine.report import device_inventory, devices_table
    inventory = device_inventory()
    if args.json:
        print(codec.dumps({**inventory, "gpus": [to_json(g) for g in inventory["gpus"]]}, compact=False))
    else:
        print(devices_table(inventory))
    return EXIT_OK
