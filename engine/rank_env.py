"""What every rank process's environment holds, whoever starts it: the worker on this machine, or torchrun
under a node agent (engine.nodes.node_run). Torchrun's own variables (RANK, WORLD_SIZE, ...) come from
whichever launches the rank."""
from __future__ import annotations

import os
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
