"""``export``, ``runs``, ``models`` and ``devices``: what is stored and what this machine has, as tables or JSON."""
from __future__ import annotations

import os
import sys

from engine.cli.parser import EXIT_INVALID, EXIT_OK
from engine.config import ExperimentConfig
from engine.results import to_json
from engine.rules import effective_batch_size
from engine.wire import codec


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
    from engine.cli.report import runs_table
    from engine.store.command import open_for_reading
    with open_for_reading(args.db) as store:
        runs = store.list_runs(limit=args.limit)
    if args.json:
        print(codec.dumps([r.to_dict() for r in runs], compact=False, finite=True))
    else:
        print(runs_table(runs))
    return EXIT_OK


def cmd_models(args) -> int:
    from engine.planner import model_listing
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
    from engine.cli.report import device_inventory, devices_table
    inventory = device_inventory()
    if args.json:
        print(codec.dumps({**inventory, "gpus": [to_json(g) for g in inventory["gpus"]]}, compact=False))
    else:
        print(devices_table(inventory))
    return EXIT_OK
