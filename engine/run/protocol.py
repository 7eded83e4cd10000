"""The worker's JSON Lines protocol (docs/protocol.md).

One event per line on the worker's stdout, each with ``v`` (protocol version),
``type`` and ``t`` (seconds since the run started). Readers ignore unknown types
and turn garbled lines into ``warning`` events instead of failing.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Iterator

VERSION = 1

# Event types the worker emits. Readers must ignore types they do not know.
LAUNCHED = "launched"  # device_pids, as soon as the rank processes exist (before torch is imported)
STARTED = "started"    # pids, device map, config
STEP = "step"          # one optimizer step: time, samples, loss, per-device busy intervals
LOG = "log"            # a line of text for the user
WARNING = "warning"    # something worth showing that does not end the run
ERROR = "error"        # message, rank, traceback; a finished event follows
FINISHED = "finished"  # status and summary; always the last event of a run
PROFILE = "profile"    # a rank's torch.profiler trace file: rank, device, path, t0 (its first profiled step)
SAMPLES = "samples"    # telemetry the nodes' agents sampled: rows in DeviceSample's field order, t on this clock
EVENT_TYPES = (LAUNCHED, STARTED, STEP, LOG, WARNING, ERROR, FINISHED, PROFILE, SAMPLES)

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


def encode(event_type: str, at: float, **fields: Any) -> str:
    """One event as one line of JSON (no trailing newline); ``at`` is its ``t`` unless fields carry one."""
    event = {"v": VERSION, "type": event_type, "t": round(at, 6)}
    event.update(fields)
    return json.dumps(finite(event), separators=(",", ":"), allow_nan=False)


def decode(line: str | bytes) -> dict:
    """Parse one line into an event dict, or raise ProtocolError saying why."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"not UTF-8: {exc}") from None
    text = line.strip()
    if not text:
        raise ProtocolError("empty line")
    try:
        event = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(event, dict):
        raise ProtocolError("not a JSON object")
    if not isinstance(event.get("type"), str):
        raise ProtocolError("no 'type' field")
    version = event.get("v")
    if version != VERSION:
        raise ProtocolError(f"protocol version {version!r}, expected {VERSION}")
    t = event.get("t")
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        raise ProtocolError("no numeric 't' field")
    return event


def read_events(lines: Iterable[str | bytes]) -> Iterator[dict]:
    """Events from lines; a garbled line becomes a ``warning`` event, never an exception."""
    for line in lines:
        if not line.strip():
            continue
        try:
            yield decode(line)
        except ProtocolError as exc:
            shown = line if isinstance(line, str) else line.decode("utf-8", "replace")
            yield {
                "v": VERSION,
                "type": WARNING,
                "t": None,
                "message": f"garbled protocol line ignored ({exc}): {shown.strip()[:200]!r}",
            }
