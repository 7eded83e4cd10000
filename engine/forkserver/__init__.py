"""A fork server: torch imported once, every rank and validation child forked from it.

A fresh interpreter spends about 3.5 s importing torch, its pipelining and the
engine before a rank does anything; a run started them one a rank, plus one for
validation. A process that owns a run (the CLI, the app, an experiment's runner)
starts one fork server (``python -m engine.forkserver``, ``client.shared()``),
which imports all that once and forks a child per request: a rank starts in
milliseconds. The children are the same programs (``python -m engine.run.rank``, ``-m
engine.run.validate``) with the same environment, descriptors and command line; where
no server can run (not Linux, ``SPLITSCOPE_FORKSERVER=0``) they start fresh, as
before. docs/architecture.md says who owns what, and how nothing outlives its owner.
"""
from engine.forkserver.client import (
    CONNECTION_ENV,
    ForkedProcess,
    ForkServer,
    hand_over_connection,
    run_module,
    shared,
    shared_pid,
    start_process,
    started,
    worker_connection,
)
from engine.forkserver.connection import ForkServerError, ForkServerRefused

__all__ = ["CONNECTION_ENV", "ForkServer", "ForkServerError", "ForkServerRefused", "ForkedProcess",
           "hand_over_connection", "run_module", "shared", "shared_pid", "start_process", "started",
           "worker_connection"]
