"""What every rank process's environment holds, whoever starts it: the worker on this machine, or torchrun
under a node agent (engine.nodes.node_run). Torchrun's own variables (RANK, WORLD_SIZE, ...) come from
whichever launches the rank."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rank_base_environment(base, *, config_json: str, devices_json: str, interface: str) -> dict[str, str]:
    """``base`` with one intra-op thread per device, and both backends on ``interface`` alone: gloo's sockets and
    NCCL's bootstrap (and its socket transport) would otherwise pick the machine's first interface."""
    return dict(base,
                GLOO_SOCKET_IFNAME=interface, NCCL_SOCKET_IFNAME=interface,
                OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",    # one intra-op thread per device
                CUDA_DEVICE_ORDER="PCI_BUS_ID",              # cuda:K is NVML's GPU K (telemetry)
                SPLITSCOPE_CONFIG=config_json, SPLITSCOPE_DEVICES=devices_json,
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH")])))


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
    def read(cls, env=None) -> "RankEnvironment":
        var = (os.environ if env is None else env).get
        fd = var("SPLITSCOPE_EVENT_FD")
        return cls(rank=int(var("RANK", "0")), local_rank=int(var("LOCAL_RANK", "0")),
                   world_size=int(var("WORLD_SIZE", "1")), config_json=var("SPLITSCOPE_CONFIG", ""),
                   devices_json=var("SPLITSCOPE_DEVICES", "[]"), event_fd=int(fd) if fd else None,
                   event_socket=var("SPLITSCOPE_EVENT_SOCKET"), store_file=var("SPLITSCOPE_STORE_FILE"),
                   store_addr=var("SPLITSCOPE_STORE_ADDR"), store_prefix=var("SPLITSCOPE_STORE_PREFIX", ""),
                   node_rank=var("SPLITSCOPE_NODE_RANK"), group_rank=var("GROUP_RANK"))
