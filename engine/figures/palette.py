"""The colours of the data, the one palette: the app's plots (dark) and the exports (white) both draw with it.

Only what stands for something lives here: a device, a run, what a device was
doing, idle time, the best point, a muted mark. The app's dark chrome (panels,
text, grid) is app/views/theme.py's; the exports' white chrome is
engine/export/drawing.py's. Every colour reads on both backgrounds.
"""
from __future__ import annotations

import re

# One colour per device (by the number in its name: device_color) or per run (runs compared, in order).
# Tableau 10 without its green, which marks the best point, and its red, which the app uses for errors.
SERIES_COLORS = ["#4e9af1", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"]

BEST = "#3fb950"        # the best bar, point or row of an experiment
MUTED = "#8b949e"       # marks that explain rather than measure: warm-up's end, the automatic split, boundaries

# What a device was doing (engine.measure.timing.KINDS): the timeline's bars and their legend.
KIND_COLORS = {
    "data": "#76b7b2",
    "data-wait": "#76b7b2",   # the data colour as a thin band (engine/figures/timeline.py KIND_HEIGHT): idle on data
    "forward": "#4e9af1",
    "backward": "#f28e2b",
    "backward-input": "#ffbe7d",
    "backward-weight": "#b6652a",
    "transfer": "#b07aa1",
    "communication": "#e15759",
    "optimizer": "#59a14f",
    "wait": MUTED,
    "eval": "#edc948",    # a watched script's evaluation, between its steps
    "other": "#bab0ac",   # a step's time no timer covered (a table's, never a bar's: no interval has it)
    # A run read from profiler traces: its kernels by type, its GPU's idle gaps by cause (engine/traces/lanes.py
    # LANE_KINDS; "communication" is the one above)
    "compute": "#4e9af1",
    "memory": "#b07aa1",
    "sync": "#9c755f",
    "host-wait": "#edc948",
    "kernel-wait": "#76b7b2",
    "other-idle": MUTED,
}
# A node folded into one timeline lane (many devices): its busy share, the deeper the more of its devices busy.
FOLDED_BUSY = KIND_COLORS["forward"]
# What a device's tensor memory holds (engine/measure/tensor_memory.py), and each collective
# (engine/measure/communication.py).
MEMORY_COLORS = {"params": "#4e9af1", "grads": "#f28e2b", "optimizer": "#b07aa1", "activations": "#76b7b2",
                 "other": "#bab0ac"}
OPERATION_COLORS = {"all-gather": "#4e9af1", "reduce-scatter": "#f28e2b", "all-reduce": "#e15759",
                    "broadcast": "#76b7b2", "all-to-all": "#edc948", "send": "#b07aa1", "recv": "#ff9da7"}
OTHER_KIND = "#9c755f"  # a kind a newer engine times that this palette does not know yet

# Idle time is the muted grey, mostly transparent: a dark lane on the app's panels, a light one on white.
IDLE = MUTED
IDLE_ALPHA = 0.22
FAINT_ALPHA = 0.3       # the raw samples behind their one-second mean

# Dash patterns by index, for series told apart by more than colour (a device's lines among runs compared):
# solid, dashed, dotted, dash-dot; as on/off lengths in line widths, which both backends take.
DASHES = [None, (4, 2), (1, 2), (4, 2, 1, 2)]


_NUMBER = re.compile(r"(\d+)\s*$")


def series_color(index: int) -> str:
    return SERIES_COLORS[index % len(SERIES_COLORS)]


def device_number(device: str) -> int | None:
    """The number a device's name ends with: 3 for "cuda:3", "cpu:3" and "core 3"; None for "cpu", and for a
    device of a run over nodes ("node1/cpu:0": every node has a cpu:0), which takes its place among the run's."""
    if "/" in device:
        return None
    match = _NUMBER.search(device)
    return int(match.group(1)) if match else None


def device_color(device: str, position: int = 0) -> str:
    """A device's one colour, wherever it is drawn (the live plots, a stored run, its exports, a CSV's
    PNG): chosen by the number in its name, so cuda:1 is the same colour in a run on cuda:0,cuda:1 and
    in one on cuda:1 alone. ``position`` (its place among the devices drawn) for a name without one."""
    number = device_number(device)
    return series_color(position if number is None else number)


def kind_color(kind: str) -> str:
    return KIND_COLORS.get(kind, OTHER_KIND)


def rgba(color: str, alpha: float) -> tuple[int, int, int, int]:
    """"#rrggbb" with an opacity (0..1), as 0-255 channels: what pyqtgraph takes."""
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16), round(alpha * 255)
