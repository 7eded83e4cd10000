"""The command line: run, runs, devices, experiment, export, what-if, models, recover, node, watch, trace, advise
(README, "Command line").

Exit status: 0 finished, 1 the run failed or was stopped, 2 invalid input (nothing launched; one line per
problem on stderr naming the option). No Qt is imported here: the CLI runs on machines without a display.
The parser is parser.py, the entry that hands each command to its room entry.py; run and what-if are
run_command.py, experiment experiment_command.py, the listings listing.py, the terminal's tables report.py;
recover, node, watch, trace and advise live with what they drive (engine/store, nodes, watch, traces, advise).
"""
from engine.cli.entry import main
from engine.cli.parser import COMMANDS, EXIT_FAILED, EXIT_INVALID, EXIT_OK, build_parser

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_INVALID", "EXIT_OK", "build_parser", "main"]
