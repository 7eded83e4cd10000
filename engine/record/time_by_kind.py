"""Each device's time per step by kind, each moment once: the same figures for an engine run (engine.record.totals),
a watched script's among them (--strategy script, engine/watch/); what they say is engine/record/findings.py's."""
from __future__ import annotations

from engine.results import DeviceKinds

# The order tables list kinds in (engine/measure/timing.py names them; engine/figures/palette.py colours them).
KIND_ORDER = ("data", "data-wait", "forward", "backward", "backward-input", "backward-weight", "transfer",
              "communication", "wait", "optimizer", "other")
OTHER = "other"   # a step's time in no kind: what the timers did not cover (the script's own Python, a bubble)


# Which kind a moment counts as where intervals overlap. An interval inside another (an all-gather FSDP waits for
# within a forward, DDP's all-reduce within the backward that waits for it at its end) is the more exact account of
# that time: the enclosing call is its envelope. Where two overlap without one holding the other, the first kind
# here: the device's own compute, then what it exchanges, then what it waits for. What is left of the others is
# their hidden (overlapped) part. Kinds not listed (a newer engine's) come last.
PRECEDENCE = ("forward", "backward", "backward-input", "backward-weight", "optimizer", "communication", "transfer",
              "data", "data-wait", "wait")
BETWEEN_STEPS = ("eval",)   # a watched script's evaluation: timed, never in a step's time (engine/watch)


_RANK = {kind: i for i, kind in enumerate(PRECEDENCE)}


EXCEEDS_STEP = 1.01   # kinds this much over their step are not rounding


def exclusive(intervals, start: float, end: float) -> tuple[dict[str, float], dict[str, float]]:
    """(seconds each kind holds, each moment counted once: the innermost interval's kind, else by
    ``PRECEDENCE``; seconds of each kind hidden under another), within ``[start, end]``: the first add up to at
    most ``end - start``. Ranks that never wait for each other (a script whose ranks form no group) run their k-th
    steps at other times than the merged step's: where the window would drop most of a device's time, its
    intervals are taken whole, and may add up to more (engine/record/findings.py says so).
    The worker runs this for every device of every step: an interval that overlaps no other (most of most steps')
    is counted as it is, and only the groups of intervals that overlap (DDP's all-reduces inside the backward) are
    swept moment by moment."""
    within = [(t0, t1, kind) for kind, t0, t1 in intervals if kind not in BETWEEN_STEPS and t1 > t0]
    clipped = [(t0 if t0 > start else start, t1 if t1 < end else end, kind) for t0, t1, kind in within
               if t1 > start and t0 < end]
    if sum(t1 - t0 for t0, t1, _ in clipped) < 0.5 * sum(t1 - t0 for t0, t1, _ in within):
        clipped = within
    clipped.sort()
    held: dict[str, float] = {}
    raw: dict[str, float] = {}
    group: list[tuple[float, float, str]] = []
    reach = float("-inf")
    for interval in clipped:
        t0, t1, kind = interval
        raw[kind] = raw.get(kind, 0.0) + (t1 - t0)
        if group and t0 >= reach:   # the group so far overlaps nothing after it
            if len(group) == 1:
                held[group[0][2]] = held.get(group[0][2], 0.0) + (group[0][1] - group[0][0])
            else:
                _hold(group, held)
            group = []
        group.append(interval)
        reach = t1 if t1 > reach else reach
    if group:
        _hold(group, held)
    held = {kind: held.get(kind, 0.0) for kind in raw}   # every kind timed, a wholly hidden one at 0
    hidden = {kind: raw[kind] - held[kind] for kind in raw if raw[kind] - held[kind] > 1e-12}
    return held, hidden


def _hold(group: list[tuple[float, float, str]], held: dict[str, float]) -> None:
    """Add to ``held`` each moment of a group of overlapping intervals (sorted by start) to the kind that holds it."""
    if len(group) == 1:
        t0, t1, kind = group[0]
        held[kind] = held.get(kind, 0.0) + (t1 - t0)
        return
    edges = sorted({t for t0, t1, _ in group for t in (t0, t1)})
    order = [(_RANK.get(kind, len(_RANK)), kind) for _, _, kind in group]
    i, open_now = 0, []
    for a, b in zip(edges, edges[1:], strict=False):
        while i < len(group) and group[i][0] <= a:
            open_now.append(i)
            i += 1
        open_now = [j for j in open_now if group[j][1] > a]
        if not open_now:
            continue
        if len(open_now) == 1:
            kind = group[open_now[0]][2]
        else:
            # an interval holding another open one (of another kind) is its envelope here: the held one counts
            innermost = [j for j in open_now if not any(
                k != j and group[k][2] != group[j][2] and group[j][0] <= group[k][0]
                and group[k][1] <= group[j][1] for k in open_now)] or open_now
            kind = min(order[j] for j in innermost)[1]
        held[kind] = held.get(kind, 0.0) + (b - a)


def ordered(kinds) -> list[str]:
    """``kinds`` in table order, unknown ones (a newer engine's) after the known."""
    return sorted(kinds, key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER), k))


def input_share(d: DeviceKinds) -> float:
    """The device's share of its step on its input: loading it in its own process ("data", busy) or waiting for its
    DataLoader's workers ("data-wait", idle)."""
    return d.share("data") + d.share("data-wait")


def exceeds_step(d: DeviceKinds) -> bool:
    """Its kinds add up to more than its step (ranks whose k-th steps fall at other times): its shares cannot be
    what they seem, so they are a finding (kinds_exceed_step), never figures."""
    return d.step_s > 0 and sum(d.by_kind.values()) > EXCEEDS_STEP * d.step_s


def table(devices: list[DeviceKinds]) -> list[str]:
    """One line per device: its step and each kind in ms, its idle share."""
    kinds = ordered({k for d in devices for k in d.by_kind})
    lines = [f"{'device':<10} {'step ms':>8} " + " ".join(f"{k:>{max(9, len(k))}}" for k in kinds) + f" {'idle':>6}"]
    for d in devices:
        lines.append(f"{d.device:<10} {1e3 * d.step_s:>8.1f} "
                     + " ".join(f"{1e3 * d.by_kind.get(k, 0.0):>{max(9, len(k))}.1f}" for k in kinds)
                     + f" {100 * d.idle_share:>5.0f}%" + ("  kinds exceed the step: see its finding" if exceeds_step(d)
                                                           else ""))
    return lines
