"""The timeline figure: what each device did during the last steps, one lane per device.

Built from the store's interval rows (an export, the app's history) or from
what the app's timeline shows (its context-menu export).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.devices import node_groups
from engine.figures.figure import Axis, Figure, Lanes
from engine.figures.heatmap import uses_heatmap
from engine.figures.numbers import is_number, pct
from engine.figures.schedule_plan import action_label, measured_actions
from engine.measure.timing import BUSY_KINDS, WAIT_KINDS
from engine.results import Bubble, Step

TIMELINE_STEPS = 3          # steps a timeline shows, on screen and in exports: one look for one run
# Waiting for a peer or for a DataLoader's workers is drawn as a thin band: timed, but the device idles; so are a
# trace's idle gaps, coloured by their cause (engine/traces/lanes.py IDLE_LANE_KINDS).
KIND_HEIGHT = {**dict.fromkeys(WAIT_KINDS, 0.3), "host-wait": 0.3, "kernel-wait": 0.3, "other-idle": 0.3}
LANE_HEIGHT = 0.72          # of a lane's pitch: the rest separates the lanes
FOLD_COLUMNS = 240          # columns of a folded node's busy shading (many devices: a lane per node)

TIMELINE = Figure("timeline", "Timeline of the last steps", Axis("time since the first step shown", "s"),
                  Axis("device"))


def device_order(known: Sequence[str], seen: Iterable[str]) -> list[str]:
    """``known`` (a summary's stage order), then devices only ``seen`` in the data, as they come."""
    order = list(known)
    for device in seen:
        if device not in order:
            order.append(device)
    return order


def timeline_figure(rows: Sequence[Sequence], devices: Sequence[str] = (), *, steps: Sequence[Step] = (),
                    bubble: Bubble | None = None, kept: tuple[int, int] | None = None,
                    last: int = TIMELINE_STEPS, plan: Sequence[Sequence[str]] | None = None) -> Figure:
    """The intervals (step, device, kind, t0, t1) of the ``last`` steps among ``rows``.

    ``steps`` give where each step ended (a step starts where the previous one ended,
    engine.record.step_merger.StepMerger); ``kept`` is (steps whose intervals are stored, steps), to
    say when the timelines are a sample; ``plan`` (the run's schedule plan) names each compute interval's
    action in the table ("0F1": engine.figures.schedule_plan.measured_actions)."""
    shown = sorted({row[0] for row in rows})[-last:]
    picked = sorted((tuple(row) for row in rows if row[0] in shown), key=lambda row: row[3])
    lanes = device_order(devices, [row[1] for row in picked])
    ends = {s.step: s.t for s in steps if s.step in shown and is_number(s.t)}
    starts: dict[int, float] = {}
    for step, _device, _kind, t0, _t1 in picked:
        starts[step] = min(starts.get(step, t0), t0)
    start = end = 0.0
    if picked:
        start = min(row[3] for row in picked)
        first = next((s for s in steps if s.step == shown[0]), None)
        if first is not None and is_number(first.t) and is_number(first.time_s):
            start = min(start, first.t - first.time_s)  # the first step's lead-in before its first interval
        end = max([row[4] for row in picked] + list(ends.values()))
    actions = measured_actions(plan, lanes, picked) if plan else {}
    # milliseconds for the short windows a timeline usually shows: "3.2 ms" reads better than "0.0032 s"
    unit, factor = ("ms", 1000.0) if end - start < 2 else ("s", 1.0)
    # a step ends where the next begins: its recorded end, else the next one's first interval
    boundaries = [ends.get(step, starts.get(after)) for step, after in zip(shown, shown[1:], strict=False)]
    title = f"Timeline of the last {len(shown) or last} steps"
    intervals = [(device, kind, (t0 - start) * factor, (t1 - start) * factor) for _, device, kind, t0, t1 in picked]
    drawn_lanes, folded = lanes, {}
    groups = node_groups(lanes)
    if uses_heatmap(len(lanes)) and len(groups) > 1:   # a lane per node, as the app folds them
        drawn_lanes, folded = fold_nodes(groups, intervals, (end - start) * factor)
        intervals = []
        title += f" · {len(lanes)} devices, a lane per node"
    if bubble is not None:
        title += f" · bubble measured {pct(bubble.measured)}, theory {pct(bubble.theory)}"
    if kept is not None and kept[0] < kept[1]:
        title += f" · full timelines kept for {kept[0]:,} of {kept[1]:,} steps"
    return TIMELINE.with_data(
        title=title, x=Axis(TIMELINE.x.label, unit),
        lanes=Lanes(drawn_lanes, intervals, (end - start) * factor,
                    [(b - start) * factor for b in boundaries if is_number(b)], folded),
        # the table in ms (every table's time) on the run's clock, as the telemetry tables' "t (ms)"
        columns=["step", "device", "kind", "t0 (ms)", "t1 (ms)", *(["action"] if actions else [])],
        rows=[[step, device, kind, t0 * 1000, t1 * 1000,
               *([action_label(kind, *actions[row]) if row in actions else None] if actions else [])]
              for row in picked for step, device, kind, t0, t1 in [row]])


def fold_nodes(groups: list[tuple[str | None, list[str]]], intervals: list[tuple[str, str, float, float]],
               end: float) -> tuple[list[str], dict[str, list[float]]]:
    """A lane per node: each node's share of its devices busy in FOLD_COLUMNS columns across ``end``."""
    import numpy as np
    width = end / FOLD_COLUMNS if end > 0 else 1.0
    number = {name: k for k, (_, names) in enumerate(groups) for name in names}
    index = {name: i for _, names in groups for i, name in enumerate(names)}
    folded = {}
    for k, (node, names) in enumerate(groups):
        mine = [(index[d], a, b) for d, kind, a, b in intervals if number.get(d) == k and kind in BUSY_KINDS]
        busy = busy_columns([a for _, a, _ in mine], [b for _, _, b in mine], [i for i, _, _ in mine], width,
                            FOLD_COLUMNS)
        folded[node or "this machine"] = np.clip(busy / (len(names) * width), 0.0, 1.0).tolist()
    return list(folded), folded


def busy_columns(t0, t1, device, width: float, columns: int):
    """Busy seconds in each column [k width, (k+1) width) of busy intervals (t0, t1: arrays, from 0) of the
    devices ``device`` (an integer array), each device's overlaps counted once: a node folded into one
    lane shades its columns by this over its devices x width (app/views/plots/timeline_bars.py)."""
    import numpy as np
    t0, t1, device = np.asarray(t0, dtype=float), np.asarray(t1, dtype=float), np.asarray(device, dtype=np.int64)
    if not len(t0) or width <= 0:
        return np.zeros(columns)
    # Merge each device's overlapping spans in one sort: devices apart on one line, ``apart`` each.
    apart = float(t1.max() - min(t0.min(), 0.0)) + 1.0
    start, end = t0 + device * apart, t1 + device * apart
    order = np.argsort(start, kind="stable")
    start, end, device = start[order], end[order], device[order]
    reach = np.maximum.accumulate(end)
    new = np.ones(len(start), dtype=bool)
    new[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(new)
    offset = device[first] * apart
    merged0, merged1 = start[first] - offset, np.maximum.reduceat(end, first) - offset
    # Busy time before each edge: the sum over spans of clip(edge - t0, 0, length), from sorted ends.
    edges = np.arange(columns + 1) * width
    return np.diff(_ramp_sum(merged0, edges) - _ramp_sum(merged1, edges))


def _ramp_sum(points, edges):
    """sum over ``points`` a of max(0, edge - a), at each edge."""
    import numpy as np
    points = np.sort(points)
    below = np.searchsorted(points, edges, side="right")
    before = np.concatenate(([0.0], np.cumsum(points)))
    return below * edges - before[below]
