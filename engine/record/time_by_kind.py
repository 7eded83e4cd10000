"""Each device's time per step by kind, each moment once: the same figures for an engine run (engine.record.totals),
a watched script's among them (--strategy script, engine/watch/); what they say is engine/record/findings.py's."""
from __future__ import annotations

from engine.results import DeviceKinds

# The order tables list kinds in (engine/measure/timing.py names them; engine/figures/palette.py colours them).
KIND_ORDER = ("data", "forward", "backward", "backward-input", "backward-weight", "transfer", "communication",
              "wait", "optimizer", "other")
OTHER = "other"   # a step's time in no kind: what the timers did not cover (the script's own Python, a bubble)


# Which kind a moment counts as where intervals overlap. An interval inside another (an all-gather FSDP waits for
# within a forward, DDP's all-reduce within the backward that waits for it at its end) is the more exact account of
# that time: the enclosing call is its envelope. Where two overlap without one holding the other, the first kind
# here: the device's own compute, then what it exchanges, then what it waits for. What is left of the others is
# their hidden (overlapped) part. Kinds not listed (a newer engine's) come last.
PRECEDENCE = ("forward", "backward", "backward-input", "backward-weight", "optimizer", "communication", "transfer",
              "data", "wait")
BETWEEN_STEPS = ("eval",)   # a watched script's evaluation: timed, never in a step's time (engine/watch)


def exclusive(intervals, start: float, end: float) -> tuple[dict[str, float], dict[str, float]]:
    """(seconds of ``[start, end]`` each kind holds, each moment counted once: the innermost interval's kind, else
    by ``PRECEDENCE``; seconds of each kind hidden under another): the first add up to at most ``end - start``. Ranks that never wait for each other
    (a script whose ranks form no group) run their k-th steps at other times than the merged step's: where the
    window would drop most of a device's time, its intervals are taken whole."""
    rank = {kind: i for i, kind in enumerate(PRECEDENCE)}
    within = [(kind, t0, t1) for kind, t0, t1 in intervals if kind not in BETWEEN_STEPS]
    clipped = [(max(t0, start), min(t1, end), kind) for kind, t0, t1 in within if min(t1, end) > max(t0, start)]
    if sum(t1 - t0 for t0, t1, _ in clipped) < 0.5 * sum(t1 - t0 for _, t0, t1 in within):
        clipped = [(t0, t1, kind) for kind, t0, t1 in within if t1 > t0]
    clipped.sort(key=lambda item: item[0])
    edges = sorted({t for t0, t1, _ in clipped for t in (t0, t1)})
    held: dict[str, float] = {}
    raw: dict[str, float] = {}
    for t0, t1, kind in clipped:
        raw[kind] = raw.get(kind, 0.0) + (t1 - t0)
    i = 0
    open_now: list[tuple[float, float, str]] = []
    for a, b in zip(edges, edges[1:]):
        while i < len(clipped) and clipped[i][0] <= a:
            open_now.append(clipped[i])
            i += 1
        open_now = [item for item in open_now if item[1] > a]
        if open_now:
            innermost = [item for item in open_now if not any(
                other is not item and other[2] != item[2] and item[0] <= other[0] and other[1] <= item[1]
                for other in open_now)] or open_now
            top = min((kind for _, _, kind in innermost), key=lambda k: (rank.get(k, len(rank)), k))
            held[top] = held.get(top, 0.0) + (b - a)
    hidden = {kind: raw[kind] - held.get(kind, 0.0) for kind in raw if raw[kind] - held.get(kind, 0.0) > 1e-12}
    return {kind: held.get(kind, 0.0) for kind in raw}, hidden


def ordered(kinds) -> list[str]:
    """``kinds`` in table order, unknown ones (a newer engine's) after the known."""
    return sorted(kinds, key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER), k))


def input_wait_line(devices: list[DeviceKinds]) -> str | None:
    """Each device's share of its step spent waiting on its input ("data"), where any waits: the bubble box
    says it beside the bubble. None where no device waits on data."""
    if not any(d.by_kind.get("data") for d in devices):
        return None
    return "input wait (data) per step: " + ", ".join(f"{d.device} {100 * d.share('data'):.0f} %" for d in devices)


def table(devices: list[DeviceKinds]) -> list[str]:
    """One line per device: its step and each kind in ms, its idle share."""
    kinds = ordered({k for d in devices for k in d.by_kind})
    lines = [f"{'device':<10} {'step ms':>8} " + " ".join(f"{k:>{max(9, len(k))}}" for k in kinds) + f" {'idle':>6}"]
    for d in devices:
        lines.append(f"{d.device:<10} {1e3 * d.step_s:>8.1f} "
                     + " ".join(f"{1e3 * d.by_kind.get(k, 0.0):>{max(9, len(k))}.1f}" for k in kinds)
                     + f" {100 * d.idle_share:>5.0f}%")
    return lines
