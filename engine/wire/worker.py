"""The worker and its session (docs/protocol.md): the run on the worker's stdin, typed events (engine.events) on
its stdout, one JSON line each.

The session writes the run first (``RunRequest``, ``request_line``), then ``STOP`` when it stops the run. The
worker writes each event with ``encode``: ``v`` (protocol version), ``type`` and ``t`` (seconds since the run
started) and the event's fields; ``decode`` reads one back, every field checked against its annotation
(engine/wire/codec.py), nested devices, nodes and the summary as their types. Readers ignore unknown types
(decode gives None) and turn garbled lines into ``Warned`` events instead of failing (``read_events``).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.events import TYPES, Warned, WorkerEvent
from engine.wire import codec

VERSION = 1
CHANNEL = codec.Channel("the worker's events", "type", TYPES)

# Lines the worker reads on its stdin after the run.
STOP = "stop"


class ProtocolError(ValueError):
    """A line that is not a protocol event."""


@dataclass(frozen=True)
class _Head:
    """What every event has, read before its own fields: a line of another version is named by it."""
    type: str
    t: Any = None       # a number (checked: codec reads a null float as NaN, and a line without one is garbled)
    v: Any = None


@dataclass(frozen=True)
class RunRequest:
    """The worker's first line: the run, and what the node agents need of it."""
    config: dict = field(default_factory=dict)     # ExperimentConfig.to_dict()
    clock_origin: float | None = None              # the session's perf_counter at the run's start
    telemetry_hz: float = 10.0                     # the node agents' sampling rate
    run_id: str | None = None                      # the rendezvous id on nodes
    resolved: dict | None = None                   # engine/run/resolved_run.py ResolvedRun.to_dict(), the session's


def request_line(request: RunRequest) -> str:
    return codec.dumps(request)


def read_request(line: str) -> RunRequest:
    """The run on the worker's first line; a bare config object is a run of it. codec.WireError naming the
    field where it is garbled."""
    channel = "the worker's run"
    message = codec.loads(line, channel) if line.strip() else None
    if not isinstance(message, dict):
        raise codec.WireError("the first line must be the run as a JSON object", channel)
    if "config" not in message:
        return RunRequest(config=message)
    return codec.typed(RunRequest, message, channel)


def encode(event: WorkerEvent) -> str:
    """One event as one line of JSON (no trailing newline)."""
    fields = CHANNEL.encode(event)
    if fields["t"] is not None:
        fields["t"] = round(fields["t"], 6)
    return codec.dumps({"v": VERSION, **fields}, finite=True)


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
        data = codec.loads(text, CHANNEL.name)
    except codec.WireError as exc:
        raise ProtocolError(exc.detail) from None
    if not isinstance(data, dict):
        raise ProtocolError("not a JSON object")
    try:
        head = codec.typed(_Head, data, CHANNEL.name)
    except codec.WireError as exc:
        raise ProtocolError(f"no '{exc.field}' field of its type") from None
    if head.v != VERSION:
        raise ProtocolError(f"protocol version {head.v!r}, expected {VERSION}")
    if not codec.is_number(head.t):
        raise ProtocolError("no numeric 't' field")
    try:
        return CHANNEL.decode(data)
    except codec.WireError as exc:
        why = "without the fields it needs" if exc.missing else "with a field of another type"
        raise ProtocolError(f"a {head.type} event {why} ({exc.detail})") from None


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
