"""The app's chrome and style sheet: panel, text and status colours, in one place."""
from __future__ import annotations

from pathlib import Path

# The app's own, installed with it (pyproject's package data; this file is in app/views/).
RESOURCES = Path(__file__).resolve().parents[1] / "resources"

BACKGROUND = "#14171c"
PANEL = "#1b1f26"
FOREGROUND = "#c9d1d9"
MUTED = "#8b949e"
GRID_ALPHA = 0.15
ERROR = "#f85149"
WARNING = "#d29922"
OK = "#3fb950"

# The colours of the data (devices, runs, what a device was doing, idle, the best point) are
# engine/figures/palette.py's, shared with the exports; this file keeps the app's dark chrome.

# The split view's stages: dark tints under light text.
STAGE_COLORS = ["#24476e", "#6b4220", "#28562f", "#6a2a2b", "#4f3a5e", "#6a5c20", "#2f5654", "#6e4550"]


def over_panel(color: str, alpha: float) -> str:
    """``color`` at opacity ``alpha`` over the panels' background, as one opaque "#rrggbb" (for rich text)."""
    def channel(i: int) -> int:
        return round(int(color[i:i + 2], 16) * alpha + int(PANEL[i:i + 2], 16) * (1 - alpha))
    return "#" + "".join(f"{channel(i):02x}" for i in (1, 3, 5))


def mute_axes(plot_item) -> None:
    """A pyqtgraph plot's left and bottom axes, their lines and numbers, in the muted chrome colour."""
    import pyqtgraph as pg
    for axis in ("left", "bottom"):
        ax = plot_item.getAxis(axis)
        ax.setPen(pg.mkPen(MUTED))
        ax.setTextPen(pg.mkPen(MUTED))


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
