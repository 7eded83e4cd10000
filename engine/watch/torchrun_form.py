"""``watch -- torchrun [torchrun options] SCRIPT.py [ARGS]``: a torchrun command line as the user already types it.

The one-machine options are read for what they mean to a watch (``--nproc-per-node``: the devices); the
ones that only say "one machine, rendezvous here" (``--standalone``, ``--nnodes 1``, ``--node-rank 0``,
``--master-port`` and the ``--rdzv-*`` ones on loopback) are accepted and change nothing, since the watch
starts the ranks itself and picks a free port on loopback. Anything that would make torchrun do
more than start N ranks of a script here (several nodes, restarts, a module, no python) is refused
with the reason, before anything starts.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

LOOPBACK = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class TorchrunForm:
    script: str
    args: list[str]
    nproc_per_node: int | None = None


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # argparse would exit; the watch says it with the other problems
        raise _Refused(message)


def _parser() -> _Parser:
    parser = _Parser(prog="torchrun", add_help=False, allow_abbrev=False)

    def option(name, *short, **kwargs):   # torchrun takes each long option with dashes or underscores
        underscored = "--" + name[2:].replace("-", "_")
        parser.add_argument(name, *([underscored] if underscored != name else []), *short, **kwargs)
    option("--nproc-per-node", dest="nproc_per_node")
    option("--nnodes", dest="nnodes", default="1")
    option("--node-rank", dest="node_rank", type=int, default=0)
    option("--standalone", dest="standalone", action="store_true")
    option("--master-addr", dest="master_addr", default="127.0.0.1")
    option("--master-port", dest="master_port", type=int)
    option("--rdzv-backend", dest="rdzv_backend")
    option("--rdzv-endpoint", dest="rdzv_endpoint", default="")
    option("--rdzv-id", dest="rdzv_id")
    option("--max-restarts", dest="max_restarts", type=int, default=0)
    option("--module", "-m", dest="module", action="store_true")
    option("--no-python", dest="no_python", action="store_true")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def read(words: list[str]) -> tuple[TorchrunForm | None, list[str]]:
    """(The command line after ``torchrun``, read; or None) and what stops it, each naming the option."""
    try:
        parsed = _parser().parse_args(words)
    except _Refused as exc:
        return None, [f"{exc}; watch reads torchrun's one-machine options: --nproc-per-node, --standalone, "
                      "--nnodes 1, --node-rank 0, --master-port and the --rdzv ones on loopback"]
    found = []
    if parsed.nnodes not in ("1", "1:1"):
        found.append(f"--nnodes {parsed.nnodes}: watch -- torchrun runs on this machine (--nnodes 1); over several, "
                     "give their agents with watch --nodes")
    if parsed.node_rank != 0:
        found.append(f"--node-rank {parsed.node_rank}: watch -- torchrun runs on this machine (--node-rank 0); "
                     "over several, give their agents with watch --nodes")
    if parsed.master_addr not in LOOPBACK or parsed.rdzv_endpoint.rpartition(":")[0] not in ("", *LOOPBACK):
        found.append("--master-addr/--rdzv-endpoint: watch -- torchrun meets on loopback, on this machine")
    if parsed.max_restarts:
        found.append(f"--max-restarts {parsed.max_restarts}: a watch does not restart ranks (0 only)")
    if parsed.module or parsed.no_python:
        found.append("-m/--no-python: watch runs a Python script file (give its path)")
    nproc = None
    if parsed.nproc_per_node is not None:
        if parsed.nproc_per_node.isdigit() and int(parsed.nproc_per_node) >= 1:
            nproc = int(parsed.nproc_per_node)
        else:
            found.append(f"--nproc-per-node: a number of ranks (1 or more), got {parsed.nproc_per_node}")
    args = parsed.args[1:] if parsed.args[:1] == ["--"] else parsed.args
    return TorchrunForm(parsed.script, args, nproc), found
