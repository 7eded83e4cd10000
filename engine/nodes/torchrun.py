"""``python -m engine.nodes.torchrun STATUS_FD STORE_FD -- TORCHRUN_ARGS``: torchrun, as a node agent starts it.

This is ``torch.distributed.run.main`` (torchrun) with three things around it:
- it dies with the agent (parent-death signal): torchrun starts its workers in
  sessions of their own, so nothing else would end them if the agent were killed;
- on the rendezvous node (STORE_FD not -1) it first hosts the c10d rendezvous store on
  the socket the agent bound: torch's own store server listens on every interface,
  this one on the agent's address alone (``master_listen_fd``); torchrun is then told
  ``is_host=0`` and connects to it like every other node, and the ranks keep their
  process group's keys in it too (engine.run.rank);
- it writes how the workers ended to STATUS_FD, one JSON object (engine/wire/nodes.py
  TorchrunReport): the failures {rank: exit code} from torchrun's ChildFailedError, or an
  error's text, or neither when all finished. torchrun itself only exits 1.
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta

from engine.environment import variable
from engine.parent_death import die_with_parent
from engine.wire import codec
from engine.wire.nodes import TorchrunReport

STORE_TIMEOUT_S = 300.0


def _endpoint(args: list[str]) -> tuple[str, int]:
    from engine.nodes.address import parse_address
    value = args[args.index("--rdzv-endpoint") + 1]
    address = parse_address(value, default_port=None)
    return address.host, address.port


def main(argv: list[str]) -> int:
    status_fd, store_fd = int(argv[0]), int(argv[1])
    args = argv[argv.index("--") + 1:]
    die_with_parent(int(variable("SPLITSCOPE_AGENT_PID", "0")) or None)
    status = os.fdopen(status_fd, "w")
    report = TorchrunReport()
    try:
        import torch.distributed as dist
        from torch.distributed import run
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        store = None  # kept alive for the run: its server thread is the rendezvous
        if store_fd != -1:
            host, port = _endpoint(args)
            store = dist.TCPStore(host, port, None, True, timedelta(seconds=STORE_TIMEOUT_S),
                                  wait_for_workers=False, multi_tenant=True, master_listen_fd=store_fd)
        try:
            run.main(args)
        except ChildFailedError as exc:
            report = TorchrunReport(failures={str(rank): failure.exitcode for rank, failure in exc.failures.items()})
        del store
    except BaseException as exc:  # a rendezvous that failed, a signal: say what, and exit non-zero
        report = TorchrunReport(error=f"{type(exc).__name__}: {exc}")
    status.write(codec.dumps(report) + "\n")
    status.flush()
    return 0 if report == TorchrunReport() else 1


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
