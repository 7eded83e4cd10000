"""Results as JSON at the boundaries, and back: ``to_json`` and the lenient ``from_json``.

``from_json`` takes what any version of Splitscope stored: a field it does not know is
ignored, a field it lacks takes its default, and a nested value of another shape (an older
run's ``batch_split``) is dropped rather than failing a whole history. The wire's strict
codec (engine/wire/codec.py) is for messages between processes; this is for what was stored.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")

def from_json(cls: type[T], data: Any) -> T | None:
    """``cls`` from parsed JSON; None when ``data`` is not an object or lacks a field ``cls`` cannot do without.

    A value of the wrong kind (null where a list belongs, text where a number does) is
    treated as missing: the field takes its default, or is None where None is allowed.
    """
    if not isinstance(data, dict):
        return None
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = _value(hints[f.name], data[f.name])
        if value is not None or _allows_none(hints[f.name]):
            kwargs[f.name] = value
    try:
        return cls(**kwargs)
    except TypeError:  # a required field missing or unreadable: the whole object is
        return None


def to_json(value) -> Any:
    """A result as plain JSON values (lists, dicts, numbers, strings)."""
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _allows_none(hint) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _value(hint, value):
    """``value`` as ``hint`` says, or None when it is not of that kind."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _value(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value)
    if origin is list:
        if not isinstance(value, list):
            return None
        (item,) = typing.get_args(hint) or (Any,)
        converted = [_value(item, v) for v in value]
        # An object of another shape is dropped; None in a list of numbers is data ("no samples").
        return [c for c in converted if c is not None] if dataclasses.is_dataclass(item) else converted
    if origin is dict:
        return value if isinstance(value, dict) else None
    if hint in (int, float):
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if hint is str:
        return value if isinstance(value, str) else None
    return value
