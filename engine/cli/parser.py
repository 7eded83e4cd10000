"""The command line's parser: its commands, their options, and bad options said our way (exit 2)."""
from __future__ import annotations

import argparse

from engine.nodes.token import DEFAULT_TEXT as TOKEN_DEFAULT
from engine.run_options import add_run_options

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


def _preset_names() -> dict[str, str]:
    from engine.experiments import PRESETS
    return {name: p.description for name, p in PRESETS.items()}


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
