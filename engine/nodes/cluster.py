"""A run's devices over several nodes: every node runs ``--devices`` (its own cpu:N or GPUs), named by node.

Node k's devices are "nodeK/cpu:0", "nodeK/cuda:1", ...: one name each in the run's
plots, store and timeline; each keeps its own index and core on its machine
(``Device.node``). Ranks go node by node, in the nodes' rank order
(engine.nodes.address.parse_nodes).
"""
from __future__ import annotations

from engine.devices import Device, DeviceError, parse
from engine.nodes.address import AddressError, NodeAddress, node_label, parse_nodes
from engine.problems import Problem
from engine.wire.nodes import Info

# Validation's stand-in for a node it has not asked yet: any GPU index and core exists
# (the node's own agent checks them before the run starts).
_ANY_GPUS = 1 << 10
_ANY_CORES = list(range(1 << 10))


def device_spec_problem(spec: str) -> str | None:
    """Why ``--devices`` cannot say one node's devices, or None: each node must be told exactly which."""
    parts = [p.strip() for p in spec.lower().split(",")]
    if len(parts) == 1 and parts[0].startswith("cpu:"):
        return None
    if all(p.startswith("cuda:") and p[5:].isdigit() for p in parts):
        return None
    return (f"with --nodes, name each node's devices exactly: cpu:N or cuda:0,cuda:1 (every node runs the same "
            f"devices); got {spec!r}")


def node_devices(label: str, spec: str, info: Info | None = None) -> list[Device]:
    """One node's devices, by its agent's ``info`` (GPUs, cores) or, before asking it, by the spec alone."""
    gpus = info.gpus if info else _ANY_GPUS
    cores = info.cores if info else _ANY_CORES
    try:
        local = parse(spec, 0, gpus=gpus, cores=cores)
    except DeviceError as exc:
        raise DeviceError(f"{label}: {exc}") from None
    return [Device(f"{label}/{d.name}", d.kind, d.index, d.core if info else None, node=label) for d in local]


def cluster_devices(spec: str, nodes: list[NodeAddress], infos: list[Info] | None = None) -> list[Device]:
    """Every node's devices, node by node in rank order."""
    devices: list[Device] = []
    for k, _ in enumerate(nodes):
        devices.extend(node_devices(node_label(k), spec, infos[k] if infos else None))
    return devices


def config_problems(config) -> list[Problem]:
    """What is wrong with ``--nodes`` and the options that go with it, without asking any node."""
    if not config.nodes:
        return []
    found = []
    try:
        parse_nodes(config.nodes)
    except AddressError as exc:
        found.append(Problem("nodes", str(exc)))
    problem = device_spec_problem(config.devices)
    if problem:
        found.append(Problem("devices", problem))
    return found


def strategy_problems(config, strategy, devices: list[Device]) -> list[Problem]:
    """A strategy that keeps its devices in one process cannot reach another machine's."""
    if not config.nodes or strategy.world_size(config, devices) == len(devices):
        return []
    from engine.strategies import STRATEGIES
    spanning = [s.name for s in STRATEGIES.values()   # the engine's own (a watched script spans by itself)
                if s.builds_model and s.world_size(config, devices) == len(devices)]
    return [Problem("strategy", f"{strategy.name} runs its devices in one process, so it cannot span nodes; "
                                f"with --nodes use {', '.join(spanning)}")]

