"""The offset between a node's clock and the coordinator's, from ping round trips (as NTP estimates it).

Ranks time their work with ``time.perf_counter()`` (CLOCK_MONOTONIC on Linux), whose
zero is each machine's own boot. For a ping sent at the coordinator's ``t0``, answered
at the node's ``t`` and back at ``t1``, the node's clock runs ``t - (t0 + t1) / 2``
ahead, give or take half the round trip; the round trip that took least bounds it
best. A node's time ``t`` is the coordinator's ``t - offset``.
"""
from __future__ import annotations

from dataclasses import dataclass

PINGS = 8  # round trips measured before a run; the quickest one is kept


@dataclass(frozen=True)
class ClockOffset:
    offset_s: float   # the node's clock minus the coordinator's
    rtt_s: float      # the round trip it was measured over: the offset is good to half of it

    def to_coordinator(self, t: float) -> float:
        return t - self.offset_s


def estimate(round_trips: list[tuple[float, float, float]]) -> ClockOffset:
    """From (t0 sent, t the node's answer, t1 received) triples: the offset over the quickest round trip."""
    if not round_trips:
        raise ValueError("no round trip to estimate a clock offset from")
    t0, t, t1 = min(round_trips, key=lambda trip: trip[2] - trip[0])
    return ClockOffset(offset_s=t - (t0 + t1) / 2, rtt_s=t1 - t0)


def shift_rank_event(event: dict, clock: ClockOffset) -> dict:
    """A rank's event with every time in it on the coordinator's clock (the fields of docs/protocol.md's
    "Rank to worker" table that hold a perf_counter time)."""
    out = dict(event)
    for key in ("time", "start", "end"):
        if isinstance(out.get(key), (int, float)):
            out[key] = clock.to_coordinator(out[key])
    intervals = out.get("intervals")
    if isinstance(intervals, dict):
        out["intervals"] = {device: [[kind, clock.to_coordinator(t0), clock.to_coordinator(t1), *rest]
                                     for kind, t0, t1, *rest in spans] for device, spans in intervals.items()}
    return out
