"""SVG building blocks for the charts: escaping, elements, nice ticks, number formats, the look.

Plain text assembly, no Qt and no plotting library, so the CLI can draw charts
on a machine with neither. The output sticks to what both browsers and Qt's
QSvgRenderer (SVG Tiny 1.2, used for PNG) draw the same way: presentation
attributes rather than CSS, no clip paths, no ``dominant-baseline`` (text is
placed by its baseline and nudged with offsets instead).
"""
from __future__ import annotations

import math
from xml.sax.saxutils import escape, quoteattr

# ---- the look -------------------------------------------------------------------
WIDTH, HEIGHT = 800, 450
FONT = "sans-serif"
TEXT = "#222222"
MUTED = "#666666"
AXIS = "#8a8a8a"
GRID = "#e6e6e6"
BACKGROUND = "#ffffff"
ACCENT = "#e15759"          # the best point or bar
IDLE = "#e9ecef"            # a device doing nothing (gaps and waits in the timeline)
# Tableau 10 without its red, which is the accent: readable on white and for
# the common colour-vision deficiencies.
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]
KIND_COLORS = {"data": "#76b7b2", "forward": "#4e79a7", "backward": "#f28e2b", "transfer": "#b07aa1",
               "communication": "#e15759", "optimizer": "#59a14f"}
OTHER_KIND = "#9c755f"

TITLE_SIZE = 16
LABEL_SIZE = 12
TICK_SIZE = 11
CHAR_WIDTH = 0.58           # average glyph width of a sans-serif face, in em: enough to lay out labels


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def text_width(text: str, size: float = TICK_SIZE) -> float:
    """An estimate of a label's rendered width; SVG has no text metrics without a renderer."""
    return len(text) * size * CHAR_WIDTH


# ---- numbers ----------------------------------------------------------------------
def is_number(value) -> bool:
    """A value that can be drawn: a real, finite number (None, NaN, inf and bools are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def num(value: float) -> str:
    """A coordinate: a tenth of a pixel is plenty, and it keeps the files small."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def nice_ticks(lo: float, hi: float, max_ticks: int = 6, *, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten) covering [lo, hi]."""
    if not (is_number(lo) and is_number(hi)):
        return [0.0, 1.0]
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:  # one value: give it some room rather than a zero-width axis
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, max_ticks - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if raw <= m * magnitude * (1 + 1e-9))
    if integer:
        step = max(1.0, round(step))
    start = math.floor(lo / step + 1e-9) * step
    end = math.ceil(hi / step - 1e-9) * step
    count = int(round((end - start) / step))
    return [start + i * step for i in range(count + 1)]


def tick_decimals(ticks: list[float]) -> int:
    if len(ticks) < 2:
        return 0
    step = abs(ticks[1] - ticks[0])
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    # 2.5, 0.25, ...: one digit more than the power of ten says
    if abs(round(step * 10 ** decimals) - step * 10 ** decimals) > 1e-6:
        decimals += 1
    return decimals


def format_tick(value: float, decimals: int) -> str:
    text = f"{value:,.{decimals}f}"
    return "0" if text.lstrip("-").strip("0.,") == "" else text  # no "-0"


def format_value(value: float) -> str:
    """A value printed on a chart (above a bar, in a title): three significant digits."""
    if not is_number(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


# ---- elements --------------------------------------------------------------------
def attrs(**values) -> str:
    """XML attributes from keywords; ``data_name`` becomes ``data-name``, ``class_`` ``class``; None is left out."""
    parts = []
    for key, value in values.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        parts.append(f"{name}={quoteattr(str(value))}")
    return " ".join(parts)


def element(tag: str, **values) -> str:
    return f"<{tag} {attrs(**values)}/>"


def text(x: float, y: float, content: str, *, size: float = TICK_SIZE, fill: str = TEXT, anchor: str = "start",
         weight: str | None = None, rotate: float | None = None, class_: str | None = None) -> str:
    transform = f"rotate({num(rotate)} {num(x)} {num(y)})" if rotate else None
    attributes = attrs(class_=class_, x=num(x), y=num(y), font_size=size, fill=fill, text_anchor=anchor,
                       font_weight=weight, transform=transform)
    return f"<text {attributes}>{escape(content)}</text>"


def line(x1: float, y1: float, x2: float, y2: float, *, stroke: str = AXIS, width: float = 1,
         dash: str | None = None, class_: str | None = None) -> str:
    return element("line", class_=class_, x1=num(x1), y1=num(y1), x2=num(x2), y2=num(y2), stroke=stroke,
                   stroke_width=width, stroke_dasharray=dash)


def rect(x: float, y: float, w: float, h: float, *, fill: str, class_: str | None = None, **extra) -> str:
    return element("rect", class_=class_, x=num(x), y=num(y), width=num(max(w, 0)), height=num(max(h, 0)),
                   fill=fill, **extra)


def document(width: float, height: float, title: str, body: list[str]) -> str:
    """A standalone SVG file: opens in a browser, inlines in HTML, renders in QSvgRenderer."""
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(width)}" height="{num(height)}" '
            f'viewBox="0 0 {num(width)} {num(height)}" font-family="{FONT}">')
    return "\n".join([head, f"<title>{escape(title)}</title>",
                      rect(0, 0, width, height, fill=BACKGROUND, class_="background"), *body, "</svg>"]) + "\n"
