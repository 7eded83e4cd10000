"""The fork server's messages, typed: what travels as one JSON object a datagram (engine/forkserver/datagrams.py),
tagged by ``op``. ``encode`` makes the object, ``decode`` reads one back, checking each field's type
(engine/wire/codec.py): a message that fails is garbled (MessageError, its ``ident`` the request's id where it
had one: a spawn is refused under it), one whose ``op`` no end knows is None, ignored.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.wire.codec import (
    Channel,
    WireError as MessageError,  # noqa: F401 (what decode raises)
)


@dataclass(frozen=True)
class Spawn:
    """Fork a child running ``python -m module argv``, its descriptors ``fds`` (its numbers, in the order of
    the descriptors sent beside the message), in ``cwd`` with ``env``; ``title``: what ps shows after it;
    ``imports``: what the child will import, imported by the server first where it has not yet (a run's strategy
    and model: engine/run/local_ranks.py), so that each of a run's ranks does not import it again."""
    id: int
    module: str
    env: dict[str, str]
    cwd: str
    fds: list[int]
    argv: list[str] = field(default_factory=list)
    title: str = ""
    imports: list[str] = field(default_factory=list)   # modules the server imports (once) before it forks this


@dataclass(frozen=True)
class Spawned:
    id: int
    pid: int


@dataclass(frozen=True)
class Refused:
    id: int | None
    error: str


@dataclass(frozen=True)
class Exited:
    """A child the connection asked for ended: its status as Popen's returncode (-N for signal N)."""
    pid: int
    code: int


@dataclass(frozen=True)
class Signal:
    pid: int
    signal: int


@dataclass(frozen=True)
class Ping:
    """Are the imports done? (The answer, Pong, comes once they are.)"""


@dataclass(frozen=True)
class Pong:
    pass


@dataclass(frozen=True)
class Client:
    """A connection for another process, its descriptor beside the message."""


Message = Spawn | Spawned | Refused | Exited | Signal | Ping | Pong | Client
CODEC = Channel("fork server", "op", {"spawn": Spawn, "spawned": Spawned, "refused": Refused, "exit": Exited, "signal": Signal,
                      "ping": Ping, "pong": Pong, "client": Client})
encode, decode = CODEC.encode, CODEC.decode
