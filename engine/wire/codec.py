"""The one codec of what processes send each other: JSON text in and out, typed messages checked on the way in.

Every JSON text the engine and the app write to or read from another process goes through ``dumps`` and
``loads`` (the store's schema, engine/store, and the foreign formats, engine/export and engine/traces, keep
theirs). A ``Channel`` maps each tag (the field named ``field``: the worker's ``type``, the fork server's
``op``) to a dataclass: ``encode`` makes the JSON object, ``decode`` reads one back and checks every field
against its annotation (int, float, str, bool, lists and dicts of them, another dataclass or a list or dict of
them, or None where the annotation allows it). A message of a known tag with a field missing or of another
type raises WireError naming the channel, the tag and the field, never the value (an environment may hold
secrets); one whose tag this end does not know is None, ignored (a newer peer's). ``typed`` does the same for an
untagged object (a child's answer). A field this end does not declare is ignored: a newer peer may add one. A
list or dict whose items need no change (no float to make of an int, no dataclass to build) comes back as it was
given, not copied: decoded messages are read, never changed in place.

JSON has no NaN or infinity. ``dumps`` writes them as Python's json does (NaN, Infinity: every end is ours and
reads them back, and an infinite learning rate must reach the validation that refuses it); with ``finite`` as null
(the worker's and a rank's events: a diverged loss must still travel as JSON any reader takes), and a null where a
float is declared reads back as NaN. A null where a field with a default is declared is that field left out (a
summary of no steps has no devices' busy shares).
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import Any


class WireError(ValueError):
    """A message no end of ours sends: ``channel`` it came on, its ``tag`` and the ``field`` at fault where
    known; ``ident``: its ``id`` where it had a whole number there (a fork server refuses a spawn under it)."""

    def __init__(self, message: str, channel: str, tag: str | None = None, field: str | None = None,
                 ident: int | None = None):
        super().__init__(f"{channel}: {message}")
        self.detail = message   # what is wrong, without the channel (an answer on that channel says it)
        self.missing = False    # a field it needs is not there (rather than there as another type)
        self.channel, self.tag, self.field, self.ident = channel, tag, field, ident


# ---- JSON text --------------------------------------------------------------------------------
def dumps(value: Any, *, sort_keys: bool = False, indent: int | None = None, compact: bool = True,
          finite: bool = False) -> str:
    """``value`` (plain JSON values, dataclasses turned into objects) as JSON text; ``finite``: NaN and infinities
    as null. Compact between processes; ``compact=False`` (json's own spacing) or ``indent`` for what a person
    reads."""
    separators = (",", ":") if compact and indent is None else None
    if not finite:
        return json.dumps(value, separators=separators, sort_keys=sort_keys, indent=indent, default=_object)
    try:   # most values hold only finite numbers: no copy made (the worker writes one a step)
        return json.dumps(value, separators=separators, sort_keys=sort_keys, indent=indent, allow_nan=False,
                          default=_object)
    except ValueError:
        return json.dumps(finite_values(value), separators=separators, sort_keys=sort_keys, indent=indent,
                          allow_nan=False, default=_object)


def loads(text: str | bytes, channel: str) -> Any:
    """The JSON value ``text`` holds; WireError naming ``channel`` where it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:   # UnicodeDecodeError is a ValueError too
        raise WireError(f"not JSON ({exc})", channel) from None


def finite_values(value: Any) -> Any:
    """``value`` with every NaN and infinity made None (JSON has none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_values(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return finite_values(dataclasses.asdict(value))
    return value


def _object(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def plain(value: Any) -> Any:
    """A field as JSON values: a dataclass, or a list of them, as objects; anything else as it is (shallow: a
    step's intervals are plain lists already, and asdict copied every one, three times the worker's cost a step)."""
    if value is None or isinstance(value, (int, float, str, dict)):
        return value
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
        return [dataclasses.asdict(v) for v in value]
    return value


# ---- typed messages -----------------------------------------------------------------------------
class Channel:
    """The messages of one channel, tagged by ``field``: ``kinds`` maps each tag to its dataclass."""

    def __init__(self, name: str, field: str, kinds: dict[str, type]):
        self.name, self.field, self.kinds = name, field, dict(kinds)
        self.names = {kind: tag for tag, kind in kinds.items()}
        for kind in kinds.values():   # every annotation is one decode checks: a new field of another type fails here
            for hint in _hints(kind).values():
                _assert_checkable(hint, kind)

    def encode(self, message) -> dict:
        """The message as a JSON object: its tag and its fields as they are (it goes to ``dumps`` at once)."""
        data = {self.field: self.names[type(message)]}
        for name in _names(type(message)):
            data[name] = plain(getattr(message, name))
        return data

    def decode(self, data: Any):
        """The message ``data`` holds; None for a tag this end does not know; WireError where it is garbled."""
        if not isinstance(data, dict):
            raise WireError("not a JSON object", self.name)
        tag = data.get(self.field)
        kind = self.kinds.get(tag) if isinstance(tag, str) else None
        if kind is None:
            return None
        ident = data.get("id")
        return _build(kind, data, _Where(self.name, tag, ident if _whole(ident) else None), f"a {tag} message")

    def line(self, message) -> str:
        """The message as one line of JSON (no newline)."""
        return dumps(self.encode(message))

    def read(self, text: str | bytes):
        """The message on one line of JSON: ``decode`` of what ``loads`` reads."""
        return self.decode(loads(text, self.name))


def typed(cls: type, data: Any, channel: str):
    """``data`` (parsed JSON) as ``cls``, every field checked as a Channel's are; WireError naming ``channel``
    and the field where it is not one."""
    where = _Where(channel, None, None)
    if not isinstance(data, dict):
        raise WireError(f"{_article(cls)} is not an object", channel)
    return _build(cls, data, where, _article(cls))


def read(cls: type, text: str | bytes, channel: str):
    """``typed`` of the JSON text ``text``."""
    return typed(cls, loads(text, channel), channel)


def _article(cls: type) -> str:
    return f"a {cls.__name__}"


@dataclasses.dataclass(frozen=True)
class _Where:
    channel: str
    tag: str | None
    ident: int | None

    def error(self, message: str, field: str) -> WireError:
        return WireError(message, self.channel, self.tag, field, self.ident)


def _build(kind: type, data: dict, where: _Where, what: str, path: str = ""):
    """``kind`` from ``data``; ``path``: where it sits in the message ("inner."), so that an error names the
    field as a path from the message's top."""
    values = {}
    for name, check, defaulted, allows_none, said in _plan(kind, where.tag):
        value = data.get(name, _ABSENT)
        if value is _ABSENT or (value is None and defaulted and not allows_none):
            if not defaulted:
                error = where.error(f"{what} without {name}", path + name)
                error.missing = True
                raise error
            continue
        values[name] = check(value, said, where, path + name)
    return kind(**values)


_ABSENT = object()
_PLANS: dict[tuple, tuple] = {}


def _plan(kind: type, tag: str | None) -> tuple:
    """Per field of ``kind``: its name, its checker, whether it has a default, whether None is allowed, and how an
    error names it; read off the annotations once a type and tag (they were read per field of every message:
    70 us a rank's step, 120 a merged step)."""
    key = (kind, tag)
    if key not in _PLANS:
        hints, label = _hints(kind), tag or kind.__name__
        _PLANS[key] = tuple(
            (f.name, _checker(hints[f.name]),
             f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
             _allows_none(hints[f.name]), f"{label}'s {f.name}")
            for f in _fields(kind))
    return _PLANS[key]


def _allows_none(hint) -> bool:
    return hint in _ANY or (typing.get_origin(hint) in (typing.Union, types.UnionType)
                            and type(None) in typing.get_args(hint))


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """An int or a float, not a bool (JSON's true is Python's 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_PLAIN = {int: _whole, float: is_number, str: lambda v: isinstance(v, str), bool: lambda v: isinstance(v, bool),
          list: lambda v: isinstance(v, list), dict: lambda v: isinstance(v, dict)}
# The exact types JSON gives each plain annotation: a container whose items' types are all among them needs no
# look at each item (``set.issuperset(map(type, ...))`` runs in C); anything else (a subclass) is looked at one by
# one as _PLAIN says.
_EXACT = {int: frozenset({int}), float: frozenset({int, float}), str: frozenset({str}), bool: frozenset({bool}),
          list: frozenset({list}), dict: frozenset({dict})}
_STR = _EXACT[str]
_FLOAT = frozenset({float})
_ANY = (Any, object)

# A checker: (value, what, where, field) -> the value as its annotation declares it (nested dataclasses built),
# or WireError naming ``what``.
_CHECKERS: dict[Any, Any] = {}


def _checker(hint):
    """The checker of ``hint``, made once a hint. Keyed by its text too: ``int | float == float | int``, but a
    union tries its options in their order (a 3 read as ``float | int`` is 3.0)."""
    key = (hint, repr(hint))
    if key not in _CHECKERS:
        _CHECKERS[key] = _make_checker(hint)
    return _CHECKERS[key]


def _make_checker(hint):
    if hint in _ANY:
        return lambda value, what, where, field: value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union_checker(args)
    if dataclasses.is_dataclass(hint):
        def check_object(value, what, where, field):
            if not isinstance(value, dict):
                raise where.error(f"{what} is not an object", field)
            return _build(hint, value, where, what, field + ".")
        return check_object
    is_kind = _PLAIN.get(origin or hint)
    if is_kind is None:   # Channel refuses such a field at once; ``typed`` only when a message holds it
        def unknown(value, what, where, field):
            raise KeyError(origin or hint)
        return unknown

    def wrong(what, where, field):
        return where.error(f"{what} is not {_named(hint)}", field)

    if hint is float:
        def check_float(value, what, where, field):
            if value is None:
                return math.nan   # dumps wrote a NaN or an infinity so
            if not is_kind(value):
                raise wrong(what, where, field)
            return float(value)
        return check_float
    if origin is list and args:
        return _list_checker(args[0], is_kind, wrong)
    if origin is dict and args:
        return _dict_checker(args[1], is_kind, wrong)

    def check_plain(value, what, where, field):
        if not is_kind(value):
            raise wrong(what, where, field)
        return value
    return check_plain


def _union_checker(args):
    allows_none = type(None) in args
    options = [_checker(a) for a in args if a is not type(None)]
    if len(options) == 1:   # X | None: most fields
        only = options[0]

        def check_optional(value, what, where, field):
            return None if value is None and allows_none else only(value, what, where, field)
        return check_optional
    first, last = options[:-1], options[-1]

    def check_union(value, what, where, field):
        if value is None and allows_none:
            return None
        for option in first:
            try:
                return option(value, what, where, field)
            except WireError:
                continue
        return last(value, what, where, field)
    return check_union


def _list_checker(item, is_kind, wrong):
    if _deep(item):
        inner = _checker(item)

        def check_deep_list(value, what, where, field):
            if not is_kind(value):
                raise wrong(what, where, field)
            if item is float and _FLOAT.issuperset(map(type, value)):
                return value
            return [inner(v, what, where, field) for v in value]
        return check_deep_list
    is_item, exact = _item_test(item)

    def check_list(value, what, where, field):
        if not is_kind(value) or not (exact.issuperset(map(type, value)) or all(map(is_item, value))):
            raise wrong(what, where, field)
        return value
    return check_list


def _dict_checker(item, is_kind, wrong):
    deep = _deep(item)
    inner = _checker(item) if deep else None
    is_item, exact = (None, None) if deep else _item_test(item)

    def check_dict(value, what, where, field):
        if not is_kind(value) or not (_STR.issuperset(map(type, value)) or all(isinstance(k, str) for k in value)):
            raise wrong(what, where, field)
        if deep:
            if item is float and _FLOAT.issuperset(map(type, value.values())):
                return value
            return {k: inner(v, what, where, field) for k, v in value.items()}
        if not (exact.issuperset(map(type, value.values())) or all(map(is_item, value.values()))):
            raise wrong(what, where, field)
        return value
    return check_dict


def _item_test(item) -> tuple:
    """A plain item's test one by one, and the exact types that pass it without one (an item of Any is deep)."""
    return _PLAIN[item], _EXACT[item]


def _deep(hint) -> bool:
    """Whether a value of ``hint`` may need building (a dataclass, a float that may be null, a nested container)
    rather than only checking."""
    return hint not in _PLAIN or hint is float


def _named(hint) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _assert_checkable(hint, kind: type) -> None:
    if hint in _ANY:
        return
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType, list, dict):
        for arg in typing.get_args(hint):
            if arg is not type(None):
                _assert_checkable(arg, kind)
        return
    assert dataclasses.is_dataclass(hint) or hint in _PLAIN, (kind, hint)
    if dataclasses.is_dataclass(hint) and hint is not kind:
        for inner in _hints(hint).values():
            _assert_checkable(inner, hint)


_FIELDS: dict[type, tuple] = {}


def _fields(kind: type) -> tuple:
    if kind not in _FIELDS:
        _FIELDS[kind] = tuple(f for f in dataclasses.fields(kind) if f.init)
    return _FIELDS[kind]


_NAMES: dict[type, tuple[str, ...]] = {}


def _names(kind: type) -> tuple[str, ...]:
    if kind not in _NAMES:
        _NAMES[kind] = tuple(f.name for f in _fields(kind))
    return _NAMES[kind]


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(kind: type) -> dict[str, Any]:
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]
