"""The command line's entry: parse, check the store's location, hand each command to its room."""
from __future__ import annotations

import sqlite3
import sys

from engine.cli.experiment_command import cmd_experiment
from engine.cli.listing import cmd_devices, cmd_export, cmd_models, cmd_runs
from engine.cli.parser import EXIT_FAILED, EXIT_INVALID, ArgumentError, build_parser
from engine.cli.run_command import (
    cmd_run,
    cmd_run_validated,
    cmd_what_if,
    nodes_usable,
    store_usable,
    validate_or_report,
)


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
