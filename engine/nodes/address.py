"""Node addresses: ``--listen ADDR:PORT`` and ``--nodes ADDR:PORT,...``, parsed and put in rank order.

Addresses are IP literals (IPv6 in brackets): an agent binds exactly the address
it is given, and torchrun's c10d rendezvous numbers the nodes by sorting the
address each gives as ``--local-addr`` (torch/distributed/elastic/rendezvous/
dynamic_rendezvous.py, ``_mark_rendezvous_complete``). So the run's nodes are
in that order too, and node k holds ranks k*n .. k*n+n-1.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import psutil

DEFAULT_PORT = 29400  # torchrun's default rendezvous port, where users look for one


class AddressError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class NodeAddress:
    host: str   # the IP as ``ipaddress`` writes it: what the agent binds and gives torchrun as --local-addr
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str, *, default_port: int | None = DEFAULT_PORT) -> NodeAddress:
    """``10.0.0.2:29400``, ``[fe80::1]:29400``, or an address alone (the default port)."""
    text = text.strip()
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else (None if not rest else "bad")
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise AddressError(f"{text!r} is not ADDR:PORT with ADDR an IP address (IPv6 in brackets), "
                           "e.g. 10.0.0.2:29400") from None
    if port is None:
        if default_port is None:
            raise AddressError(f"{text!r} has no port; give ADDR:PORT")
        return NodeAddress(str(ip), default_port)
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise AddressError(f"{text!r}: the port must be a number from 1 to 65535")
    return NodeAddress(str(ip), int(port))


def parse_nodes(text: str) -> list[NodeAddress]:
    """The nodes of ``--nodes``, in rank order (torchrun's: by address), each once; at least two."""
    parts = [p for p in (s.strip() for s in text.split(",")) if p]
    nodes = [parse_address(p) for p in parts]
    if len(set(nodes)) != len(nodes):
        raise AddressError("a node is listed twice")
    if len({n.host for n in nodes}) != len(nodes):
        raise AddressError("two nodes share an address; torchrun tells nodes apart by address")
    if len(nodes) < 2:
        raise AddressError("give at least two nodes, ADDR:PORT,ADDR:PORT (one node is a run without --nodes)")
    return sorted(nodes, key=lambda n: n.host)


def node_label(index: int) -> str:
    """How devices, ranks and plots name node ``index`` (rank order): "node0", "node1", ..."""
    return f"node{index}"


def interface_of(host: str) -> str | None:
    """The network interface that holds ``host`` (for GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME), or None."""
    for name, addresses in psutil.net_if_addrs().items():
        for a in addresses:
            if a.address.split("%")[0] == host:
                return name
    return None


def network_of(host: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The subnet of the interface holding ``host`` (its address with its netmask), or None."""
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.address.split("%")[0] == host and a.netmask:
                # A mask as a prefix length: ip_network takes "a.b.c.d/255.255.255.0" but no IPv6 mask form.
                prefix = bin(int(ipaddress.ip_address(a.netmask.split("%")[0]))).count("1")
                return ipaddress.ip_network(f"{host}/{prefix}", strict=False)
    return None


def parse_networks(text: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``--allow 10.0.0.1,10.0.1.0/24``: addresses or networks a coordinator may connect from."""
    found = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            found.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise AddressError(f"{part!r} is not an IP address or network (e.g. 10.0.0.1 or 10.0.0.0/24)") from None
    if not found:
        raise AddressError("give at least one address or network")
    return found


def allowed(peer: str, networks) -> bool:
    try:
        ip = ipaddress.ip_address(peer.split("%")[0])
    except ValueError:
        return False
    return any(ip in network for network in networks)
