"""Colours and the style sheet: one place, so plots, timeline and history agree."""
from __future__ import annotations

from pathlib import Path

RESOURCES = Path(__file__).resolve().parents[2] / "resources"  # the repository's (this file is in app/views/)

BACKGROUND = "#14171c"
PANEL = "#1b1f26"
FOREGROUND = "#c9d1d9"
MUTED = "#8b949e"
GRID_ALPHA = 0.15
ERROR = "#f85149"
WARNING = "#d29922"
OK = "#3fb950"

# One colour per device, in device order, the same in every plot.
DEVICE_COLORS = ["#4e9af1", "#f28e2b", "#59c36a", "#e15759", "#b07aa1", "#edc948",
                 "#76b7b2", "#ff9da7", "#9c755f", "#bab0ac"]
# One colour per run when several runs are compared.
RUN_COLORS = ["#4e9af1", "#f28e2b", "#59c36a", "#e15759", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7"]

# Timeline: what a device was doing.
KIND_COLORS = {
    "data": "#76b7b2",
    "forward": "#4e9af1",
    "backward": "#f28e2b",
    "transfer": "#b07aa1",
    "communication": "#e15759",
    "optimizer": "#59c36a",
    "wait": "#8b949e",
}
IDLE_COLOR = "#262b33"
STAGE_COLORS = ["#24476e", "#6b4220", "#28562f", "#6a2a2b", "#4f3a5e", "#6a5c20", "#2f5654", "#6e4550"]


def faint(color: str, alpha: int = 70) -> tuple[int, int, int, int]:
    """The colour ("#rrggbb"), mostly transparent, as pyqtgraph takes it: raw samples behind their mean."""
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16), alpha


def device_color(index: int) -> str:
    return DEVICE_COLORS[index % len(DEVICE_COLORS)]


def run_color(index: int) -> str:
    return RUN_COLORS[index % len(RUN_COLORS)]


def stage_color(index: int) -> str:
    return STAGE_COLORS[index % len(STAGE_COLORS)]


def style_sheet() -> str:
    path = RESOURCES / "style.qss"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def icon_path(name: str) -> str:
    return str(RESOURCES / "icons" / name)
