"""The worker's JSON Lines protocol (docs/protocol.md): typed events (engine.events) on a pipe.

One event per line on the worker's stdout, each with ``v`` (protocol version),
``type`` and ``t`` (seconds since the run started). ``encode`` writes an event,
``decode`` reads one back; readers ignore unknown types (decode gives None) and
turn garbled lines into ``Warned`` events instead of failing.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from engine.events import NAMES, TYPES, Warned, WorkerEvent
from engine.results import from_json

VERSION = 1

# Lines the worker reads on its stdin. The first line is the config.
STOP = "stop"


class ProtocolError(ValueError):
    """A line that is not a protocol event."""


def finite(value: Any) -> Any:
    # JSON has no NaN or infinity; a diverged loss must still travel.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def encode(event: WorkerEvent) -> str:
    """One event as one line of JSON (no trailing newline)."""
    # Shallow: a step's intervals are plain lists already, and finite() copies them once; dataclasses.asdict
    # copied every one first, three times the worker's cost per step at 200 intervals (1.5 ms against 0.45).
    fields = {name: _plain(getattr(event, name)) for name in _field_names(type(event))}
    if fields["t"] is not None:
        fields["t"] = round(fields["t"], 6)
    message = {"v": VERSION, "type": NAMES[type(event)], **fields}
    try:   # most events hold only finite numbers: no copy made (the worker encodes one a step)
        return json.dumps(message, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(finite(message), separators=(",", ":"), allow_nan=False)


@functools.cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


def _plain(value: Any) -> Any:
    """A field as JSON values: the nested results (Started's devices and nodes, Finished's summary) as dicts."""
    if value is None or isinstance(value, (int, float, str, dict)):   # most fields: no dataclass to look for
        return value
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
        return [dataclasses.asdict(v) for v in value]
    return value


def decode(line: str | bytes) -> WorkerEvent | None:
    """Parse one line into its event; None for a type this reader does not know; ProtocolError saying why
    a line is no event."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"not UTF-8: {exc}") from None
    text = line.strip()
    if not text:
        raise ProtocolError("empty line")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("not a JSON object")
    if not isinstance(data.get("type"), str):
        raise ProtocolError("no 'type' field")
    version = data.get("v")
    if version != VERSION:
        raise ProtocolError(f"protocol version {version!r}, expected {VERSION}")
    t = data.get("t")
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        raise ProtocolError("no numeric 't' field")
    kind = TYPES.get(data["type"])
    if kind is None:
        return None
    event = from_json(kind, data)
    if event is None:
        raise ProtocolError(f"a {data['type']} event without the fields it needs")
    return event


def read_events(lines: Iterable[str | bytes]) -> Iterator[WorkerEvent]:
    """Events from lines; a garbled line becomes a ``Warned`` event, never an exception; a type this
    reader does not know is skipped."""
    for line in lines:
        if not line.strip():
            continue
        try:
            event = decode(line)
        except ProtocolError as exc:
            shown = line if isinstance(line, str) else line.decode("utf-8", "replace")
            yield Warned(t=None, message=f"garbled protocol line ignored ({exc}): {shown.strip()[:200]!r}")
            continue
        if event is not None:
            yield event
