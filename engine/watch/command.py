"""``main.py watch [--devices cpu:N] [--steps N] [--json] -- SCRIPT.py [ARGS]``: a user's own training script,
unmodified, run as the ranks of one job and timed by kind per device (engine/watch/)."""
from __future__ import annotations

import argparse
import json
import os

from engine.results import to_json

WARMUP_STEPS = 1   # the first step builds optimizer state and warms caches: left out of the figures


def add_parser(sub) -> None:
    watch = sub.add_parser("watch", help="run your own training script (torchrun-style, one rank per device) and "
                                         "see each device's time by kind: forward, backward, communication, "
                                         "optimizer, data, idle")
    watch.add_argument("--devices", default="cpu:2",
                       help='"cpu:N": N ranks, each pinned to a core of its own (default cpu:2); GPUs: not yet')
    watch.add_argument("--steps", type=int, default=None,
                       help="stop the script after this many optimizer steps (default: let it end)")
    watch.add_argument("--json", action="store_true", help="print only the summary as one JSON object")
    watch.add_argument("script", help="the training script, as you would give it to torchrun")
    watch.add_argument("script_args", nargs=argparse.REMAINDER, help="its own arguments")


def problems(args) -> list[str]:
    """What is wrong before anything starts: each names the option and what it allows."""
    from engine.devices import DeviceError, parse
    found = []
    if os.path.basename(args.script) == "torchrun":
        found.append("SCRIPT: give the script itself (`watch --devices cpu:2 -- train.py`); watch starts its ranks "
                     "as torchrun does")
    elif not os.path.isfile(args.script):
        found.append(f"SCRIPT: no such file: {args.script}")
    else:
        try:
            with open(args.script, "rb") as f:
                compile(f.read(), args.script, "exec")
        except SyntaxError as exc:
            found.append(f"SCRIPT: {exc.filename}, line {exc.lineno}: {exc.msg}: {(exc.text or '').strip()}")
    if args.steps is not None and args.steps < 1:
        found.append(f"--steps: must be at least 1, got {args.steps}")
    if "cuda" in args.devices.lower():   # timing a GPU's work needs CUDA events, which the instruments lack yet
        found.append(f"--devices: watch runs on CPU virtual devices for now (cpu:N), got {args.devices}")
    else:
        try:
            parse(args.devices, 2, gpus=0)
        except DeviceError as exc:
            found.append(f"--devices: {exc}")
    return found


def cmd_watch(args) -> int:
    import sys

    from engine.devices import parse
    from engine.watch.launcher import Watch
    from engine.watch.summary import table
    found = problems(args)
    if found:
        for line in found:
            print(line, file=sys.stderr)
        return 2
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    summary = Watch(args.script, script_args, parse(args.devices, 2, gpus=0), steps=args.steps,
                    warmup=WARMUP_STEPS).run()
    print(json.dumps(to_json(summary)) if args.json else table(summary))
    if summary.traceback and not args.json:
        print(summary.traceback, file=sys.stderr)
    return 0 if summary.status == "finished" else 1
