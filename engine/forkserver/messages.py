"""The fork server's messages, typed: what travels as one JSON object a datagram (engine/forkserver/wire.py),
tagged by ``op``. ``encode`` makes the object, ``decode`` reads one back, checking each field's type: a
message that fails is garbled (MessageError), one whose ``op`` no end knows is None, ignored.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


class MessageError(ValueError):
    """A message of a known op with a field missing or of the wrong type: what no fork server end sends.
    ``ident``: the request's id where it had one (a spawn is refused under it)."""

    def __init__(self, message: str, op: str, ident=None):
        super().__init__(message)
        self.op, self.ident = op, ident


@dataclass(frozen=True)
class Spawn:
    """Fork a child running ``python -m module argv``, its descriptors ``fds`` (its numbers, in the order of
    the descriptors sent beside the message), in ``cwd`` with ``env``; ``title``: what ps shows after it."""
    id: int
    module: str
    env: dict[str, str]
    cwd: str
    fds: list[int]
    argv: list[str] = field(default_factory=list)
    title: str = ""


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
_OPS: dict[str, type] = {"spawn": Spawn, "spawned": Spawned, "refused": Refused, "exit": Exited,
                         "signal": Signal, "ping": Ping, "pong": Pong, "client": Client}
_NAMES = {kind: op for op, kind in _OPS.items()}


def encode(message: Message) -> dict:
    return {"op": _NAMES[type(message)], **dataclasses.asdict(message)}


def decode(data: dict) -> Message | None:
    op = data.get("op")
    kind = _OPS.get(op) if isinstance(op, str) else None
    if kind is None:
        return None
    ident = data.get("id") if _fits(data.get("id"), "int") else None
    values = {}
    for f in dataclasses.fields(kind):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise MessageError(f"{op} without {f.name}", op, ident)
            continue
        value = data[f.name]
        if not _fits(value, f.type):
            # the type only, not the value: an environment is large, and may hold secrets
            raise MessageError(f"{op}'s {f.name} is not {f.type}", op, ident)
        values[f.name] = value
    return kind(**values)


def _number(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fits(value, annotation: str) -> bool:
    """Whether a JSON value has the field's annotated type (the annotations above: strings, ``_CHECKS``'s)."""
    return _CHECKS[annotation](value)


_CHECKS = {
    "int": _number,
    "int | None": lambda v: v is None or _number(v),
    "str": lambda v: isinstance(v, str),
    "list[int]": lambda v: isinstance(v, list) and all(_number(x) for x in v),
    "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "dict[str, str]": lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str)
                                                            for k, x in v.items()),
}
# Every field's annotation has its check: a field added with another type fails here, at import, on both ends.
assert all(f.type in _CHECKS for kind in _OPS.values() for f in dataclasses.fields(kind))
