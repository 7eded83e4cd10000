"""Three chart kinds as standalone SVG text: lines (with error bars), bars, and a device timeline.

No Qt and no plotting library: the CLI exports on machines without either, and
the same SVG is embedded in the HTML report and rendered to PNG. Each curve is
one identifiable element (``<polyline class="series" data-name=...>``, ``<rect
class="bar" data-name=...>``, ``<rect class="interval" data-device=...
data-kind=...>``) so a test, or a user's script, can find what was drawn.

Values that cannot be drawn (None, NaN, inf) are skipped point by point; a chart
with nothing left to draw says "no data" instead of failing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from engine.export.svg import (
    ACCENT, AXIS, GRID, HEIGHT, IDLE, KIND_COLORS, LABEL_SIZE, MUTED, OTHER_KIND, TEXT, TITLE_SIZE, WIDTH, attrs,
    color, document, element, format_tick, format_value, is_number, line, nice_ticks, num, rect, text, text_width,
    tick_decimals,
)
from engine.timing import BUSY_KINDS

MAX_POINTS = 2000        # per drawn curve; longer ones keep each bucket's min and max (peaks survive)
MARKER_LIMIT = 40        # curves with at most this many points get a dot on each point
KIND_ORDER = BUSY_KINDS
IDLE_KINDS = ("wait",)   # a device waiting for its neighbour computes nothing: drawn as idle


@dataclass
class Series:
    """One named curve. ``style`` may set ``color``, ``dash`` (an SVG dash array), ``width``, ``opacity``,
    and ``legend`` (False: no legend entry, for the faint raw samples behind a mean)."""
    name: str
    xs: Sequence[Any]
    ys: Sequence[Any]
    yerr: Sequence[Any] | None = None
    style: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Mark:
    """A highlighted x position (the best point of a sweep, the automatic split), with a ring at ``y`` if given."""
    x: float
    label: str
    y: float | None = None
    color: str = ACCENT


# ---- the frame every chart shares ----------------------------------------------------------
class _Frame:
    """Title, legend rows, and the plot box below them; maps data to pixels once the ranges are known."""

    def __init__(self, title: str, legend: list[tuple[str, tuple]], *, width: float = WIDTH,
                 height: float = HEIGHT, left: float = 70, bottom: float = 50, right: float = 24,
                 plot_height: float | None = None):
        """``plot_height``, when given, sizes the chart to fit its plot box (the timeline's lanes)."""
        self.width = width
        self.parts: list[str] = [text(16, 28, title, size=TITLE_SIZE, weight="bold", class_="title")]
        legend_bottom = self._legend(legend, y=52) if legend else 36
        self.left, self.right, self.top = left, width - right, legend_bottom + 14
        self.height = self.top + plot_height + bottom if plot_height is not None else height
        self.bottom = self.height - bottom

    # legend entries: (label, swatch) where swatch is ("line", color, dash), ("box", color),
    # ("errorbar", color) or ("ring", color)
    def _legend(self, entries: list[tuple[str, tuple]], y: float) -> float:
        x, row_y = 16.0, y
        items = []
        for label, swatch in entries:
            w = 22 + text_width(label) + 18
            if x + w > self.width - 16 and x > 16:
                x, row_y = 16.0, row_y + 18
            items.append(self._swatch(x, row_y, swatch))
            items.append(text(x + 22, row_y + 4, label, fill=TEXT))
            x += w
        self.parts.append('<g class="legend">' + "".join(items) + "</g>")
        return row_y + 8

    @staticmethod
    def _swatch(x: float, y: float, swatch: tuple) -> str:
        kind, fill = swatch[0], swatch[1]
        if kind == "line":
            return line(x, y, x + 16, y, stroke=fill, width=2.5, dash=swatch[2] if len(swatch) > 2 else None)
        if kind == "box":
            return rect(x + 2, y - 6, 12, 12, fill=fill)
        if kind == "errorbar":
            return (line(x + 8, y - 6, x + 8, y + 6, stroke=fill) + line(x + 4, y - 6, x + 12, y - 6, stroke=fill)
                    + line(x + 4, y + 6, x + 12, y + 6, stroke=fill))
        return element("circle", cx=num(x + 8), cy=num(y), r=5, fill="none", stroke=fill, stroke_width=2)

    def set_ranges(self, x0: float, x1: float, y0: float, y1: float) -> None:
        self.x0, self.x1 = x0, (x1 if x1 != x0 else x0 + 1)
        self.y0, self.y1 = y0, (y1 if y1 != y0 else y0 + 1)

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * (self.right - self.left)

    def py(self, y: float) -> float:
        return self.bottom - (y - self.y0) / (self.y1 - self.y0) * (self.bottom - self.top)

    def y_axis(self, ticks: list[float], label: str) -> None:
        decimals = tick_decimals(ticks)
        out = []
        for t in ticks:
            y = self.py(t)
            out.append(line(self.left, y, self.right, y, stroke=GRID))
            out.append(text(self.left - 6, y + 4, format_tick(t, decimals), fill=MUTED, anchor="end"))
        middle = (self.top + self.bottom) / 2
        out.append(text(18, middle, label, size=LABEL_SIZE, fill=TEXT, anchor="middle", rotate=-90,
                        class_="axis-label"))
        self.parts.append('<g class="y-axis">' + "".join(out) + "</g>")

    def x_axis(self, ticks: list[float] | None, label: str) -> None:
        out = [line(self.left, self.bottom, self.right, self.bottom, stroke=AXIS)]
        if ticks:
            decimals = tick_decimals(ticks)
            for t in ticks:
                x = self.px(t)
                out.append(line(x, self.bottom, x, self.bottom + 4, stroke=AXIS))
                out.append(text(x, self.bottom + 17, format_tick(t, decimals), fill=MUTED, anchor="middle"))
        if label:
            out.append(text((self.left + self.right) / 2, self.height - 10, label, size=LABEL_SIZE, fill=TEXT,
                            anchor="middle", class_="axis-label"))
        self.parts.append('<g class="x-axis">' + "".join(out) + "</g>")

    def svg(self, title: str) -> str:
        return document(self.width, self.height, title, self.parts)


def _left_margin(tick_labels: Iterable[str]) -> float:
    """Room for the rotated axis label and the widest tick label."""
    return 34 + max((text_width(t) for t in tick_labels), default=0) + 8


def empty_chart(title: str, *, xlabel: str = "", ylabel: str = "", message: str = "no data",
                width: float = WIDTH, height: float = HEIGHT) -> str:
    """A chart frame that says why there is nothing to see, so a report never has a hole."""
    frame = _Frame(title, [], width=width, height=height, left=60)
    frame.parts.append(rect(frame.left, frame.top, frame.right - frame.left, frame.bottom - frame.top,
                            fill="none", stroke=GRID))
    if ylabel:
        frame.parts.append(text(18, (frame.top + frame.bottom) / 2, ylabel, size=LABEL_SIZE, anchor="middle",
                                rotate=-90, class_="axis-label"))
    if xlabel:
        frame.parts.append(text((frame.left + frame.right) / 2, frame.height - 10, xlabel, size=LABEL_SIZE,
                                anchor="middle", class_="axis-label"))
    frame.parts.append(text((frame.left + frame.right) / 2, (frame.top + frame.bottom) / 2 + 6, message,
                            size=TITLE_SIZE, fill=MUTED, anchor="middle", class_="no-data"))
    return frame.svg(title)


# ---- line chart -------------------------------------------------------------------------------
def _points(s: Series) -> list[tuple[float, float, float | None]]:
    errs = list(s.yerr) if s.yerr is not None else []
    out = []
    for i, (x, y) in enumerate(zip(s.xs, s.ys)):
        if is_number(x) and is_number(y):
            e = errs[i] if i < len(errs) and is_number(errs[i]) else None
            out.append((float(x), float(y), abs(e) if e is not None else None))
    return out


def _decimate(points: list[tuple[float, float, Any]], limit: int) -> list[tuple[float, float, Any]]:
    """At most ``limit`` points, keeping each bucket's lowest and highest (pyqtgraph's 'peak' mode)."""
    if len(points) <= limit:
        return points
    buckets = limit // 2
    size = len(points) / buckets
    out = []
    for b in range(buckets):
        chunk = points[int(b * size):int((b + 1) * size)]
        if chunk:
            lo, hi = min(chunk, key=lambda p: p[1]), max(chunk, key=lambda p: p[1])
            out.extend(sorted({lo, hi}, key=lambda p: p[0]))
    return out


def line_chart(series: Sequence[Series | Mapping], *, title: str, xlabel: str, ylabel: str,
               marks: Sequence[Mark] | None = None, y_range: tuple[float | None, float | None] | None = None) -> str:
    """Curves over a shared x axis. ``y_range`` pins either end (e.g. (0, 100) for utilization)."""
    series = [s if isinstance(s, Series) else Series(**s) for s in series]
    marks = [m for m in (marks or []) if is_number(m.x)]
    drawn = [(i, s, _points(s)) for i, s in enumerate(series)]
    drawn = [(i, s, pts) for i, s, pts in drawn if pts]
    if not drawn:
        return empty_chart(title, xlabel=xlabel, ylabel=ylabel)

    xs = [p[0] for _, _, pts in drawn for p in pts] + [m.x for m in marks]
    lows = [p[1] - (p[2] or 0) for _, _, pts in drawn for p in pts] + [m.y for m in marks if is_number(m.y)]
    highs = [p[1] + (p[2] or 0) for _, _, pts in drawn for p in pts] + [m.y for m in marks if is_number(m.y)]
    y_lo, y_hi = min(lows), max(highs)
    if y_range:
        y_lo = y_range[0] if is_number(y_range[0]) else y_lo
        y_hi = max(y_range[1], y_hi) if is_number(y_range[1]) else y_hi
    x_ticks = nice_ticks(min(xs), max(xs), 8, integer=all(float(x).is_integer() for x in xs))
    y_ticks = nice_ticks(y_lo, y_hi, 6)
    y_labels = [format_tick(t, tick_decimals(y_ticks)) for t in y_ticks]

    legend = [(s.name, ("line", s.style.get("color", color(i)), s.style.get("dash"))) for i, s, _ in drawn
              if s.style.get("legend", True)]
    if any(p[2] is not None for _, _, pts in drawn for p in pts):
        legend.append(("± std", ("errorbar", MUTED)))
    for m in marks:
        entry = (m.label, ("ring", m.color) if is_number(m.y) else ("line", m.color, "5 4"))
        if entry not in legend:
            legend.append(entry)
    frame = _Frame(title, legend, left=_left_margin(y_labels))
    frame.set_ranges(x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1])
    frame.y_axis(y_ticks, ylabel)
    frame.x_axis(x_ticks, xlabel)

    for i, s, pts in drawn:
        stroke = s.style.get("color", color(i))
        body = []
        shown = _decimate(pts, MAX_POINTS)
        points = " ".join(f"{num(frame.px(x))},{num(frame.py(y))}" for x, y, _ in shown)
        body.append(element("polyline", class_="series", data_name=s.name, points=points, fill="none",
                            stroke=stroke, stroke_width=s.style.get("width", 2), stroke_dasharray=s.style.get("dash"),
                            stroke_opacity=s.style.get("opacity"), stroke_linejoin="round", stroke_linecap="round"))
        for x, y, e in pts if len(pts) <= MARKER_LIMIT else []:
            if e:  # error bar with caps
                cx, top, bottom = frame.px(x), frame.py(y + e), frame.py(y - e)
                body.append(line(cx, top, cx, bottom, stroke=stroke, width=1.2))
                body.append(line(cx - 4, top, cx + 4, top, stroke=stroke, width=1.2))
                body.append(line(cx - 4, bottom, cx + 4, bottom, stroke=stroke, width=1.2))
            body.append(element("circle", class_="point", cx=num(frame.px(x)), cy=num(frame.py(y)), r=3,
                                fill=stroke))
        frame.parts.append(f"<g {attrs(class_='curve', data_name=s.name)}>" + "".join(body) + "</g>")

    for row, m in enumerate(marks):
        frame.parts.append(_mark(frame, m, row))
    return frame.svg(title)


def _mark(frame: _Frame, m: Mark, row: int = 0) -> str:
    """A dashed vertical line with its label; labels of several marks stack so they never overprint."""
    x = frame.px(m.x)
    parts = [line(x, frame.top, x, frame.bottom, stroke=m.color, width=1.2, dash="5 4")]
    if is_number(m.y):
        parts.append(element("circle", cx=num(x), cy=num(frame.py(m.y)), r=7, fill="none", stroke=m.color,
                             stroke_width=2))
    # keep the label inside the plot box near its edges
    anchor = "start" if x < frame.left + 60 else "end" if x > frame.right - 60 else "middle"
    dx = 4 if anchor == "start" else -4 if anchor == "end" else 0
    parts.append(text(x + dx, frame.top + 12 + 15 * row, m.label, fill=m.color, anchor=anchor, weight="bold"))
    return f"<g {attrs(class_='mark', data_name=m.label)}>" + "".join(parts) + "</g>"


# ---- bar chart --------------------------------------------------------------------------------
def bar_chart(labels: Sequence[str], means: Sequence[Any], stds: Sequence[Any] | None = None, *, title: str,
              ylabel: str, highlight: int | None = None, refs: Sequence[Any] | None = None,
              ref_label: str = "theory") -> str:
    """One bar per label, from zero, with ± std error bars; ``highlight`` is drawn in the accent colour and
    labelled "best"; ``refs`` (optional) draws a reference value across each bar (e.g. the theoretical bubble)."""
    labels = [str(label) for label in labels]
    n = len(labels)
    means = list(means) + [None] * (n - len(means))
    stds = list(stds or []) + [None] * (n - len(stds or []))
    refs = list(refs or []) + [None] * (n - len(refs or []))
    if not any(is_number(m) for m in means):
        return empty_chart(title, ylabel=ylabel)

    tops = [m + (s if is_number(s) else 0) for m, s in zip(means, stds) if is_number(m)]
    tops += [r for r in refs if is_number(r)]
    bottoms = [min(0.0, m) for m in means if is_number(m)]
    y_ticks = nice_ticks(min(bottoms), max(tops) * 1.08 if max(tops) > 0 else max(tops), 6)
    y_labels = [format_tick(t, tick_decimals(y_ticks)) for t in y_ticks]

    left = _left_margin(y_labels)
    slot = (WIDTH - 24 - left) / max(n, 1)
    widest = max(text_width(label) for label in labels)
    rotated = widest > slot - 6        # long labels lean instead of overlapping
    bottom = widest * 0.5 + 28 if rotated else 30

    legend = [(ylabel, ("box", color(0)))]
    if any(is_number(s) for s in stds):
        legend.append(("± std", ("errorbar", TEXT)))
    if highlight is not None and 0 <= highlight < n:
        legend.append(("best", ("box", ACCENT)))
    if any(is_number(r) for r in refs):
        legend.append((ref_label, ("line", TEXT, "4 3")))
    frame = _Frame(title, legend, left=left, bottom=bottom)
    frame.set_ranges(0, n, y_ticks[0], y_ticks[-1])
    frame.y_axis(y_ticks, ylabel)
    frame.x_axis(None, "")

    bar_w = min(64.0, slot * 0.62)
    for i, (label, mean, std, ref) in enumerate(zip(labels, means, stds, refs)):
        cx = frame.px(i + 0.5)
        best = i == highlight
        fill = ACCENT if best else color(0)
        parts = []
        top = frame.py(0)
        if is_number(mean):
            y0, y1 = frame.py(max(mean, 0)), frame.py(min(mean, 0))
            parts.append(rect(cx - bar_w / 2, y0, bar_w, y1 - y0, fill=fill, class_="bar", data_name=label,
                              data_value=repr(float(mean))))
            top = y0
            if is_number(std) and std > 0:
                hi, lo = frame.py(mean + std), frame.py(mean - std)
                parts += [line(cx, hi, cx, lo, stroke=TEXT, width=1.2),
                          line(cx - 5, hi, cx + 5, hi, stroke=TEXT, width=1.2),
                          line(cx - 5, lo, cx + 5, lo, stroke=TEXT, width=1.2)]
                top = min(top, hi)
        if is_number(ref):
            ry = frame.py(ref)
            parts.append(line(cx - bar_w / 2 - 4, ry, cx + bar_w / 2 + 4, ry, stroke=TEXT, width=2, dash="4 3",
                              class_="ref"))
            top = min(top, ry)
        value = format_value(mean) if is_number(mean) else "n/a"
        parts.append(text(cx, top - 5, value, size=10, fill=MUTED, anchor="middle", class_="value"))
        if best:
            parts.append(text(cx, top - 18, "best", fill=ACCENT, anchor="middle", weight="bold", class_="best"))
        if rotated:
            parts.append(text(cx + 4, frame.bottom + 14, label, fill=TEXT, anchor="end", rotate=-30))
        else:
            parts.append(text(cx, frame.bottom + 17, label, fill=TEXT, anchor="middle"))
        frame.parts.append("<g>" + "".join(parts) + "</g>")
    return frame.svg(title)


# ---- timeline -------------------------------------------------------------------------------
def timeline_chart(rows: Mapping[str, Sequence[tuple[str, float, float]]], *, title: str,
                   t_range: tuple[float, float] | None = None, boundaries: Sequence[float] | None = None) -> str:
    """One lane per device; coloured where it computed (data, forward, backward, transfer, optimizer),
    light grey where it was idle: gaps between intervals and "wait" intervals alike."""
    lanes = {dev: [(k, float(a), float(b)) for k, a, b in spans if is_number(a) and is_number(b) and b >= a]
             for dev, spans in rows.items()}
    busy = [(k, a, b) for spans in lanes.values() for k, a, b in spans if k not in IDLE_KINDS]
    if not lanes or not any(lanes.values()):
        return empty_chart(title, xlabel="time")
    if t_range is None:
        everything = [s for spans in lanes.values() for s in spans]
        t_range = (min(a for _, a, _ in everything), max(b for _, _, b in everything))
    t0, t1 = t_range
    span = max(t1 - t0, 1e-9)
    # milliseconds for the short windows the timeline usually shows: "3.2 ms" reads better than "0.0032 s"
    unit, factor = ("ms", 1000.0) if span < 2 else ("s", 1.0)
    # the axis ends where the window ends; ticks stop inside it
    x_ticks = [t for t in nice_ticks(0, span * factor, 8) if t <= span * factor * (1 + 1e-9)]

    kinds = [k for k in KIND_ORDER if any(b[0] == k for b in busy)]
    kinds += sorted({b[0] for b in busy} - set(KIND_ORDER))
    legend = [(k, ("box", KIND_COLORS.get(k, OTHER_KIND))) for k in kinds] + [("idle / wait", ("box", IDLE))]
    if boundaries:
        legend.append(("step boundary", ("line", MUTED, "3 3")))
    lane_h, gap = 26.0, 10.0
    left = 24 + max(text_width(d, LABEL_SIZE) for d in lanes)
    frame = _Frame(title, legend, left=left, bottom=46, plot_height=len(lanes) * (lane_h + gap))
    frame.set_ranges(0, span * factor, 0, 1)
    for t in x_ticks:  # vertical grid behind the lanes
        frame.parts.append(line(frame.px(t), frame.top, frame.px(t), frame.bottom, stroke=GRID))
    frame.x_axis(x_ticks, f"time since the first step shown ({unit})")

    def px(t: float) -> float:
        return frame.px((min(max(t, t0), t1) - t0) * factor)

    for lane, (device, spans) in enumerate(lanes.items()):
        y = frame.top + lane * (lane_h + gap) + gap / 2
        parts = [rect(frame.left, y, px(t1) - frame.left, lane_h, fill=IDLE, class_="lane", data_device=device),
                 text(frame.left - 8, y + lane_h / 2 + 4, device, size=LABEL_SIZE, anchor="end")]
        for kind, a, b in spans:
            if kind in IDLE_KINDS or b < t0 or a > t1:
                continue
            x0, x1 = px(a), px(b)
            parts.append(rect(x0, y, max(x1 - x0, 0.6), lane_h, fill=KIND_COLORS.get(kind, OTHER_KIND),
                              class_="interval", data_device=device, data_kind=kind))
        frame.parts.append('<g class="device">' + "".join(parts) + "</g>")
    for b in boundaries or []:
        if is_number(b) and t0 <= b <= t1:
            frame.parts.append(line(px(b), frame.top, px(b), frame.bottom, stroke=MUTED, dash="3 3",
                                    class_="boundary"))
    return frame.svg(title)
