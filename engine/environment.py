"""The environment: every variable Splitscope reads goes through ``variable`` (the two descriptors handed to a
child, SPLITSCOPE_FORKSERVER_FD and the store's, are taken out with ``os.environ.pop``: no grandchild may
inherit them), its child processes get the
project on their path (``with_project_path``), and what a rank process's environment holds, whoever starts it
(the worker on this machine, or torchrun under a node agent, engine.nodes.node_run; torchrun's own variables,
RANK, WORLD_SIZE, ..., come from whichever launches the rank).

Splitscope's own variables: SPLITSCOPE_DB (the run store, engine/store/database.py), SPLITSCOPE_SETTINGS (the
app's settings file, app/settings.py), SPLITSCOPE_NODE_TOKEN_FILE (engine/nodes/token.py), SPLITSCOPE_FORKSERVER
(engine/forkserver/client.py: "0" turns it off; SPLITSCOPE_FORKSERVER_FD, a connection handed down),
SPLITSCOPE_QUIT_AFTER_MS (app/application.py, for tools and tests), SPLITSCOPE_RANK_MODULE (engine/run/local_ranks.py:
the module each rank runs, for tests), SPLITSCOPE_RELAY_TITLE (engine/forkserver/relay.py),
SPLITSCOPE_WATCH_INSTRUMENTS (engine/watch/bootstrap.py: "0" runs a watched script untimed, "silent" timed
without reporting steps, for bench/watch_bench.py), SPLITSCOPE_AGENT_PID
(engine/nodes/torchrun.py), SPLITSCOPE_RUN_FOLDER (engine/run/session.py: the run's own temporary folder, which
the session removes when the worker has ended, however it ended), the store's control descriptor
(engine/store/server.py CONTROL_ENV), and those a rank reads (RankEnvironment below).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_FOLDER = "SPLITSCOPE_RUN_FOLDER"


def variable(name: str, default: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The environment variable ``name`` (of ``env``, default this process's), or ``default`` where unset."""
    return (os.environ if env is None else env).get(name, default)


def with_project_path(base: Mapping[str, str] | None = None, **changes: str) -> dict[str, str]:
    """``base`` (default this process's environment) with ``changes`` and the project first on PYTHONPATH: a
    child runs ``-m engine....`` from any working directory."""
    base = os.environ if base is None else base
    path = os.pathsep.join(filter(None, [str(ROOT), variable("PYTHONPATH", env=base)]))
    return dict(base, **changes, PYTHONPATH=path)


def rank_base_environment(base, *, config_json: str, devices_json: str, interface: str) -> dict[str, str]:
    """``base`` with one intra-op thread per device, and both backends on ``interface`` alone: gloo's sockets and
    NCCL's bootstrap (and its socket transport) would otherwise pick the machine's first interface."""
    return with_project_path(base,
                             GLOO_SOCKET_IFNAME=interface, NCCL_SOCKET_IFNAME=interface,
                             OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",    # one intra-op thread per device
                             CUDA_DEVICE_ORDER="PCI_BUS_ID",              # cuda:K is NVML's GPU K (telemetry)
                             SPLITSCOPE_CONFIG=config_json, SPLITSCOPE_DEVICES=devices_json)


@dataclass(frozen=True)
class RankEnvironment:
    """What a rank process reads of its environment, read once (engine.run.rank): torchrun's variables
    (from the worker, engine.run.local_ranks, or from torchrun under a node agent) and Splitscope's."""
    rank: int
    local_rank: int
    world_size: int
    config_json: str                 # SPLITSCOPE_CONFIG: the run's ExperimentConfig
    devices_json: str                # SPLITSCOPE_DEVICES: every device of the run, in rank order
    event_fd: int | None             # SPLITSCOPE_EVENT_FD: the pipe to the worker, on this machine
    event_socket: str | None         # SPLITSCOPE_EVENT_SOCKET: the node agent's socket, under torchrun
    store_file: str | None           # SPLITSCOPE_STORE_FILE: the rendezvous file, on this machine
    store_addr: str | None           # SPLITSCOPE_STORE_ADDR: the rendezvous store's address, on nodes
    store_prefix: str                # SPLITSCOPE_STORE_PREFIX: the run's keys in it
    node_rank: str | None            # SPLITSCOPE_NODE_RANK: the node's rank Splitscope expects
    group_rank: str | None           # torchrun's GROUP_RANK: the one torchrun gave it

    @classmethod
    def read(cls, env=None) -> RankEnvironment:
        def var(name: str, default: str | None = None) -> str | None:
            return variable(name, default, env)
        fd = var("SPLITSCOPE_EVENT_FD")
        return cls(rank=int(var("RANK", "0")), local_rank=int(var("LOCAL_RANK", "0")),
                   world_size=int(var("WORLD_SIZE", "1")), config_json=var("SPLITSCOPE_CONFIG", ""),
                   devices_json=var("SPLITSCOPE_DEVICES", "[]"), event_fd=int(fd) if fd else None,
                   event_socket=var("SPLITSCOPE_EVENT_SOCKET"), store_file=var("SPLITSCOPE_STORE_FILE"),
                   store_addr=var("SPLITSCOPE_STORE_ADDR"), store_prefix=var("SPLITSCOPE_STORE_PREFIX", ""),
                   node_rank=var("SPLITSCOPE_NODE_RANK"), group_rank=var("GROUP_RANK"))
