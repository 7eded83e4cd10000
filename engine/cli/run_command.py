"""``run`` and ``what-if``: a config checked (every problem said, nothing launched), its store and nodes usable, the
run supervised to its end (Ctrl-C stops it in order); a run's what-if predictions."""
from __future__ import annotations

import signal
import sqlite3
import sys
import threading

from engine.cli.parser import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from engine.config import ConfigError, ExperimentConfig
from engine.results import to_json
from engine.rules import watches_script
from engine.run_options import config_from_args
from engine.wire import codec


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
        from engine.cli.report import predictions_table, summary_table
        if result.summary:
            print(summary_table(result.summary))
            if predictions:
                print(predictions_table(predictions, under_run=result.run_id))
        else:
            print(f"run {result.run_id}: {result.status}")
    return EXIT_OK if result.status == "finished" else EXIT_FAILED


def _predictions(result, db) -> list:
    """What-if step times of GPipe and 1F1B at other micro-batch counts, from this run (engine.planner.what_if): torch-
    free, so `run` stays quick; every schedule is `what-if RUN_ID`'s. A prediction that fails costs the run
    nothing: the run is stored and reported without it."""
    from engine.planner.what_if import predict_stored
    from engine.store import open_store
    try:
        with open_store(db) as store:
            return predict_stored(store, result.run_id, multi_stage=False)
    except (ValueError, ArithmeticError) as exc:
        print(f"warning: no what-if for run {result.run_id}: {exc}", file=sys.stderr)
        return []


def cmd_what_if(args) -> int:
    from engine.cli.report import predictions_table
    from engine.planner.what_if import predict_stored, unpredictable
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
