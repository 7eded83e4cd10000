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


_RANK = {kind: i for i, kind in enumerate(PRECEDENCE)}


def exclusive(intervals, start: float, end: float) -> tuple[dict[str, float], dict[str, float]]:
    """(seconds each kind holds, each moment counted once: the innermost interval's kind, else by
    ``PRECEDENCE``; seconds of each kind hidden under another), within ``[start, end]``: the first add up to at
    most ``end - start``. Ranks that never wait for each other (a script whose ranks form no group) run their k-th
    steps at other times than the merged step's: where the window would drop most of a device's time, its
    intervals are taken whole, and may add up to more (engine/record/findings.py says so).
    The worker runs this for every device of every step: intervals that do not overlap (most steps' most) are
    counted as they are."""
    within = [(t0, t1, kind) for kind, t0, t1 in intervals if kind not in BETWEEN_STEPS and t1 > t0]
    clipped = [(t0 if t0 > start else start, t1 if t1 < end else end, kind) for t0, t1, kind in within
               if t1 > start and t0 < end]
    if sum(t1 - t0 for t0, t1, _ in clipped) < 0.5 * sum(t1 - t0 for t0, t1, _ in within):
        clipped = within
    clipped.sort()
    raw: dict[str, float] = {}
    reach, overlapping = float("-inf"), False
    for t0, t1, kind in clipped:
        raw[kind] = raw.get(kind, 0.0) + (t1 - t0)
        overlapping = overlapping or t0 < reach
        reach = max(reach, t1)
    if not overlapping:
        return raw, {}
    held = dict.fromkeys(raw, 0.0)
    edges = sorted({t for t0, t1, _ in clipped for t in (t0, t1)})
    order = [(_RANK.get(kind, len(_RANK)), kind) for _, _, kind in clipped]
    i, open_now = 0, []
    for a, b in zip(edges, edges[1:]):
        while i < len(clipped) and clipped[i][0] <= a:
            open_now.append(i)
            i += 1
        open_now = [j for j in open_now if clipped[j][1] > a]
        if not open_now:
            continue
        if len(open_now) == 1:
            held[clipped[open_now[0]][2]] += b - a
            continue
        # an interval holding another open one (of another kind) is its envelope here: the held one counts
        innermost = [j for j in open_now if not any(
            k != j and clipped[k][2] != clipped[j][2] and clipped[j][0] <= clipped[k][0]
            and clipped[k][1] <= clipped[j][1] for k in open_now)] or open_now
        held[min(order[j] for j in innermost)[1]] += b - a
    hidden = {kind: raw[kind] - held[kind] for kind in raw if raw[kind] - held[kind] > 1e-12}
    return held, hidden


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
