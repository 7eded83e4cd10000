"""Typed messages tagged by one field: the JSON objects two processes send each other, read back checked.

A ``Tagged`` codec maps each tag (the fork server's ``op``, engine/forkserver/messages.py; the node wire's
``type``, engine/nodes/messages.py) to a dataclass. ``encode`` makes the JSON object; ``decode`` reads one
back and checks every field against its annotation (int, float, str, bool, lists and dicts of them, another
message, or None where the annotation allows it): a message of a known tag with a field missing or of another
type raises MessageError naming the field and the type it wants, never the value (an environment may hold
secrets); one whose tag this end does not know is None, ignored (a newer peer's).
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any


class MessageError(ValueError):
    """A message of a known tag that no end of ours sends. ``ident``: its ``id`` where it had a whole number
    there (a fork server refuses a spawn under it)."""

    def __init__(self, message: str, tag: str, ident: int | None = None):
        super().__init__(message)
        self.tag, self.ident = tag, ident


class Tagged:
    def __init__(self, field: str, kinds: dict[str, type]):
        self.field, self.kinds = field, dict(kinds)
        self.names = {kind: tag for tag, kind in kinds.items()}
        for kind in kinds.values():   # every annotation is one decode checks: a new field of another type fails here
            for hint in _hints(kind).values():
                _assert_checkable(hint, kind)
                # encode copies a nested message only where a field is one (a list of them would reach JSON as is)
                assert typing.get_origin(hint) not in (list, dict) or not any(
                    dataclasses.is_dataclass(arg) for arg in typing.get_args(hint)), (kind, hint)

    def encode(self, message) -> dict:
        """The message as a JSON object: its fields as they are (it goes to json.dumps at once), a nested
        message as its own object. asdict's deep copy of every list and dict was 38 us a rank's step event,
        most of a node agent's cost of relaying it."""
        data = {self.field: self.names[type(message)]}
        for name in _names(type(message)):
            value = getattr(message, name)
            data[name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        return data

    def decode(self, data: dict):
        tag = data.get(self.field)
        kind = self.kinds.get(tag) if isinstance(tag, str) else None
        if kind is None:
            return None
        ident = data.get("id")
        return _build(kind, data, f"a {tag} message", tag, ident if _whole(ident) else None)


def _build(kind: type, data: dict, what: str, tag: str, ident: int | None):
    values = {}
    hints = _hints(kind)
    for f in dataclasses.fields(kind):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise MessageError(f"{what} without {f.name}", tag, ident)
            continue
        values[f.name] = _checked(hints[f.name], data[f.name], f"{tag}'s {f.name}", tag, ident)
    return kind(**values)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_PLAIN = {int: _whole, float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str), bool: lambda v: isinstance(v, bool),
          list: lambda v: isinstance(v, list), dict: lambda v: isinstance(v, dict)}


def _checked(hint, value, what: str, tag: str, ident: int | None):
    """``value`` as ``hint`` declares it (a nested message built), or MessageError naming ``what``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _checked(inner, value, what, tag, ident)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise MessageError(f"{what} is not an object", tag, ident)
        return _build(hint, value, what, tag, ident)
    if not _PLAIN[origin or hint](value):
        raise MessageError(f"{what} is not {_named(hint)}", tag, ident)
    if origin is list and args and args[0] in _PLAIN and not all(_PLAIN[args[0]](v) for v in value):
        raise MessageError(f"{what} is not {_named(hint)}", tag, ident)
    if origin is dict and args and not all(_PLAIN[args[0]](k) and (args[1] not in _PLAIN or _PLAIN[args[1]](v))
                                           for k, v in value.items()):
        raise MessageError(f"{what} is not {_named(hint)}", tag, ident)
    return float(value) if hint is float else value


def _named(hint) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _assert_checkable(hint, kind: type) -> None:
    options = [a for a in typing.get_args(hint) if a is not type(None)] \
        if typing.get_origin(hint) in (typing.Union, types.UnionType) else [hint]
    for option in options:
        base = typing.get_origin(option) or option
        assert dataclasses.is_dataclass(option) or base in _PLAIN, (kind, hint)


_NAMES: dict[type, tuple[str, ...]] = {}


def _names(kind: type) -> tuple[str, ...]:
    if kind not in _NAMES:
        _NAMES[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return _NAMES[kind]


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(kind: type) -> dict[str, Any]:
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]
