"""The one export backend: a figure definition (engine.figures) drawn by matplotlib as PNG, SVG or PDF.

matplotlib is imported when a file is drawn, never when this module is: the
engine and the CLI run where it is not installed (the GPU machines), and CSV
needs none of it; ``require()`` says so before an export creates anything. Only
non-interactive canvases draw: Agg for PNG, matplotlib's own SVG and PDF writers
for the others. pyplot, and with it every GUI backend, is never imported, so the
app's process (Qt) and a machine without a display export alike.

Each drawn element carries a gid (``<figure>/series/<name>``, ``/bar/<label>``,
``/errors/<name>``, ``/mark/<label>``, ``/interval/<device>/<kind>``): an id in the SVG by which a
test, or a user's script, finds what was drawn.
"""
from __future__ import annotations

import io
import re
import textwrap
import threading
from pathlib import Path

from engine.export.errors import ExportError
from engine.figures import palette
from engine.figures.figure import Figure
from engine.figures.numbers import format_value, is_number
from engine.figures.timeline import KIND_HEIGHT, LANE_HEIGHT
from engine.measure.timing import KINDS

FORMATS = ("png", "svg", "pdf")
INSTALL = "pip install matplotlib==3.10.7"
WIDTH_IN, HEIGHT_IN = 8.0, 4.5
PNG_DPI = 200            # 1600 pixels wide: crisp on high-DPI screens and in slides
MAX_POINTS = 2000        # per drawn curve; longer ones keep each bucket's lowest and highest (peaks survive)
TITLE_CHARACTERS = 95    # a longer title wraps (a timeline's says its bubble and its sample)
LEGEND_ROWS = 14         # entries a legend column holds beside a figure's height; more make a second column

# The exports' white chrome; the colours of the data are engine.figures.palette's.
TEXT = "#222222"
AXIS = "#8a8a8a"
GRID = "#e6e6e6"
STYLE = {
    "svg.fonttype": "none",          # text stays text: searchable in the HTML report, and a tenth of the size
    "svg.hashsalt": "splitscope",    # the same figure, the same file
    "font.size": 10, "text.color": TEXT, "axes.labelcolor": TEXT, "axes.edgecolor": AXIS,
    "xtick.color": TEXT, "ytick.color": TEXT, "axes.grid": True, "grid.color": GRID, "axes.axisbelow": True,
    "axes.spines.top": False, "axes.spines.right": False, "legend.frameon": False, "legend.fontsize": 9,
}

# matplotlib is not thread-safe, and its settings are global: the app may export a plot on the UI thread
# while File › Export draws on its own.
_LOCK = threading.Lock()


def require() -> None:
    """Raise ExportError now, before an export creates folders it cannot fill."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ExportError(f"png, svg, pdf and html export draw with matplotlib, which is not installed here "
                          f"({exc}); install it with `{INSTALL}` (csv export works without it)") from exc


# The same figure, the same file: no time of writing in it (a re-export does not show as changed).
UNDATED = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}


def draw(figure: Figure, fmt: str) -> bytes:
    """The figure as a PNG, SVG or PDF file's bytes."""
    if fmt not in FORMATS:
        raise ValueError(f"cannot draw {fmt!r}; one of {', '.join(FORMATS)}")
    require()
    import matplotlib
    with _LOCK, matplotlib.rc_context(STYLE):
        buffer = io.BytesIO()
        _draw(figure).savefig(buffer, format=fmt, dpi=PNG_DPI if fmt == "png" else 100,
                              metadata={"Title": figure.title, **UNDATED.get(fmt, {})})
    return buffer.getvalue()


def write(figure: Figure, fmt: str, path: str | Path) -> Path:
    path = Path(path)
    path.write_bytes(draw(figure, fmt))
    return path


def inline_svg(figure: Figure) -> str:
    """The figure's SVG for an HTML page: without the XML prolog, document type and RDF metadata."""
    text = draw(figure, "svg").decode("utf-8")
    text = text[text.index("<svg"):]
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.DOTALL)


# ---- drawing --------------------------------------------------------------------------------
def _draw(figure: Figure):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MatplotlibFigure
    # a timeline is as tall as its lanes need
    height = max(2.4, 1.5 + 0.5 * len(figure.lanes.devices)) if figure.lanes is not None else HEIGHT_IN
    if figure.heat is not None:   # as tall as its rows need, from a 64-device run to a 256-device one
        height = max(HEIGHT_IN, min(12.0, 2.5 + 0.06 * len(figure.heat.devices)))
    picture = MatplotlibFigure(figsize=(WIDTH_IN, height), layout="constrained")
    FigureCanvasAgg(picture)
    if figure.heat is not None and figure.has_data:
        _heat(picture, figure)
        return picture
    axes = picture.add_subplot()
    axes.set_title("\n".join(textwrap.wrap(figure.title, TITLE_CHARACTERS)), loc="left", fontsize=12,
                   fontweight="bold")
    axes.set_xlabel(figure.x.text)
    axes.set_ylabel(figure.y.text)
    if not figure.has_data:
        axes.text(0.5, 0.5, "no data", transform=axes.transAxes, ha="center", va="center", fontsize=16,
                  color=palette.MUTED, gid=f"{figure.name}/no-data")
        axes.set_xticks([])
        axes.set_yticks([])
    elif figure.bars is not None:
        _bars(axes, figure)
    elif figure.lanes is not None:
        _lanes(axes, figure)
    else:
        _lines(axes, figure)
    return picture


def _lines(axes, figure: Figure) -> None:
    import numpy as np
    for s in figure.series:
        x, y = _floats(s.x), _floats(s.y)
        err = _floats(s.yerr) if s.yerr is not None else None
        keep = _peaks(y, MAX_POINTS)
        x, y, err = x[keep], y[keep], (err[keep] if err is not None else None)
        finite = int(np.sum(np.isfinite(x) & np.isfinite(y)))
        axes.plot(x, y, color=s.color, linewidth=s.width, alpha=palette.FAINT_ALPHA if s.faint else 1.0,
                  dashes=palette.DASHES[s.dash % len(palette.DASHES)] or (None, None),
                  marker="o" if s.markers or finite == 1 else None, markersize=5,
                  label="_nolegend_" if s.faint else s.name, gid=f"{figure.name}/series/{s.name}")
        if err is not None and np.isfinite(err).any():
            axes.errorbar(x, y, yerr=np.abs(err), fmt="none", ecolor=s.color, elinewidth=1.2, capsize=4,
                          gid=f"{figure.name}/errors/{s.name}")
    for m in figure.marks:
        if not is_number(m.x):
            continue
        axes.axvline(m.x, color=m.color, linewidth=1.2, dashes=(5, 4), label=m.label,
                     gid=f"{figure.name}/mark/{m.label}")
        if is_number(m.y):
            axes.plot([m.x], [m.y], marker="o", markersize=14, markerfacecolor="none", markeredgecolor=m.color,
                      markeredgewidth=2, linestyle="none", label="_nolegend_")
    low, high = figure.y_range
    if is_number(low):
        axes.set_ylim(bottom=low)
    if is_number(high):
        axes.set_ylim(top=max(high, axes.get_ylim()[1]))
    if all(float(v).is_integer() for s in figure.series for v in s.x if is_number(v)):
        axes.xaxis.get_major_locator().set_params(integer=True)  # steps, devices: never 2.5
    if axes.get_legend_handles_labels()[0]:
        _legend_outside(axes)


def _bars(axes, figure: Figure) -> None:
    bars = figure.bars
    n = len(bars.labels)
    values = [v if is_number(v) else None for v in bars.values]
    errors = list(bars.errors or []) + [None] * n
    refs = list(bars.refs or []) + [None] * n
    bottoms = [0.0] * n
    for segment in bars.segments or []:
        heights = [v if is_number(v) else 0.0 for v in segment.values]
        axes.bar(range(n), heights, bottom=bottoms, width=0.62, color=segment.color, label=segment.name,
                 gid=f"{figure.name}/segment/{segment.name}")
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for i, (label, value) in enumerate(zip(bars.labels, values, strict=True)):
        if value is None:
            continue
        if bars.segments:
            axes.annotate(format_value(value), (i, value), xytext=(0, 3), textcoords="offset points",
                          ha="center", va="bottom", fontsize=8, color=palette.MUTED)
            continue
        best = i == bars.best
        error = errors[i] if is_number(errors[i]) and errors[i] > 0 else None
        axes.bar([i], [value], width=0.62, color=palette.BEST if best else bars.color, yerr=error, capsize=5,
                 error_kw={"ecolor": TEXT, "elinewidth": 1.2, "gid": f"{figure.name}/errors/{label}"},
                 gid=f"{figure.name}/bar/{label}",
                 label="best" if best else "_nolegend_")
        top = max(value, 0) + (error or 0)
        axes.annotate(("best\n" if best else "") + format_value(value), (i, top), xytext=(0, 3),
                      textcoords="offset points", ha="center", va="bottom", fontsize=8,
                      color=palette.BEST if best else palette.MUTED)
    drawn_refs = [(i, r) for i, r in enumerate(refs[:n]) if is_number(r)]
    for k, (i, ref) in enumerate(drawn_refs):
        axes.hlines(ref, i - 0.4, i + 0.4, colors=TEXT, linewidth=2, linestyles=(0, (4, 3)),
                    label=bars.ref_label if k == 0 else "_nolegend_", gid=f"{figure.name}/ref/{bars.labels[i]}")
    axes.set_xticks(range(n), bars.labels, rotation=30 if sum(map(len, bars.labels)) > 70 else 0,
                    ha="right" if sum(map(len, bars.labels)) > 70 else "center")
    axes.set_xlim(-0.6, n - 0.4)
    axes.margins(y=0.12)
    axes.grid(axis="x", visible=False)
    if bars.best is not None or drawn_refs or bars.segments:
        _legend_outside(axes)


def _lanes(axes, figure: Figure) -> None:
    from matplotlib.patches import Patch
    lanes = figure.lanes
    row = {device: i for i, device in enumerate(lanes.devices)}
    for device, i in row.items():
        axes.barh(i, lanes.end, height=LANE_HEIGHT, left=0, color=palette.IDLE, alpha=palette.IDLE_ALPHA,
                  gid=f"{figure.name}/lane/{device}")
    for node, shares in lanes.folded.items():   # a node folded into one lane: its busy share, column by column
        width = (lanes.end or 1.0) / max(len(shares), 1)
        columns = [(k * width, width) for k, share in enumerate(shares) if share > 0]
        colours = [(*[c / 255 for c in palette.rgba(palette.FOLDED_BUSY, 1.0)[:3]], 0.15 + 0.85 * share)
                   for share in shares if share > 0]
        axes.broken_barh(columns, (row[node] - LANE_HEIGHT / 2, LANE_HEIGHT), facecolors=colours,
                         gid=f"{figure.name}/folded/{node}")
    kinds = [k for k in KINDS if any(kind == k for _, kind, _, _ in lanes.intervals)]
    kinds += sorted({kind for _, kind, _, _ in lanes.intervals} - set(kinds))
    for device, i in row.items():
        for kind in kinds:
            spans = [(a, max(b - a, 0.0)) for d, k, a, b in lanes.intervals if d == device and k == kind]
            if spans:
                height = KIND_HEIGHT.get(kind, LANE_HEIGHT)
                axes.broken_barh(spans, (i - height / 2, height), facecolors=palette.kind_color(kind),
                                 gid=f"{figure.name}/interval/{device}/{kind}")
    if lanes.boundaries:
        axes.vlines(lanes.boundaries, -0.5, len(row) - 0.5, colors=palette.MUTED, linewidth=1,
                    linestyles=(0, (3, 3)), gid=f"{figure.name}/boundaries")
    axes.set_yticks(range(len(row)), lanes.devices)
    axes.set_ylim(len(row) - 0.5, -0.5)   # the first device on top, as the app draws it
    axes.set_xlim(0, lanes.end or 1)
    axes.set_ylabel("")
    axes.grid(axis="y", visible=False)
    legend = [Patch(color=palette.kind_color(k), label=k) for k in kinds]
    if lanes.folded:
        legend.append(Patch(color=palette.FOLDED_BUSY, label="a node's devices busy"))
    legend.append(Patch(color=palette.IDLE, alpha=palette.IDLE_ALPHA, label="idle"))
    _legend_outside(axes, handles=legend)


def _heat(picture, figure: Figure) -> None:
    """A heatmap (engine/figures/heatmap.py): each node's mean as lines above, a row per device below, rows
    grouped by node with a hairline between nodes, the colour bar at the right."""
    from engine.figures.heatmap import COLORMAP, as_matrix
    heat = figure.heat
    means, axes = picture.subplots(2, 1, sharex=True, height_ratios=(1, 3))
    means.set_title("\n".join(textwrap.wrap(figure.title, TITLE_CHARACTERS)), loc="left", fontsize=12,
                    fontweight="bold")
    for s in figure.series:
        means.plot(_floats(s.x), _floats(s.y), color=s.color, linewidth=s.width, label=s.name,
                   gid=f"{figure.name}/series/{s.name}")
    means.set_ylabel(figure.y.unit or "")
    low, high = heat.low, heat.high
    means.set_ylim(low, high * 1.05)
    if len(figure.series) > 1:
        _legend_outside(means)
    matrix = as_matrix(heat.values)
    end = heat.x0 + heat.dx * heat.columns
    image = axes.imshow(matrix, aspect="auto", interpolation="nearest", cmap=COLORMAP, vmin=low, vmax=high,
                        extent=(heat.x0, end, len(heat.devices) - 0.5, -0.5), gid=f"{figure.name}/heat")
    picture.colorbar(image, ax=axes, label=figure.y.text, pad=0.01)
    blocks = heat.groups()
    if len(blocks) > 1:
        axes.set_yticks([first + (rows - 1) / 2 for _, first, rows in blocks], [node for node, _, _ in blocks])
        for _, first, _ in blocks[1:]:
            axes.axhline(first - 0.5, color="white", linewidth=0.8)
    else:   # one machine: the devices themselves, as many as fit
        every = max(1, -(-len(heat.devices) // 32))
        axes.set_yticks(range(0, len(heat.devices), every), heat.devices[::every])
    axes.set_xlabel(figure.x.text)
    axes.set_ylabel("device")
    axes.grid(False)


def _legend_outside(axes, **handles) -> None:
    """The legend right of the axes, never over the data (the constrained layout makes room for it),
    as the app's legend sits in a row of its own (app/views/plots/legend.py)."""
    entries = len(handles.get("handles") or axes.get_legend_handles_labels()[0])
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                ncols=1 + (entries - 1) // LEGEND_ROWS, **handles)


# ---- data -------------------------------------------------------------------------------------
def _floats(values):
    import numpy as np
    return np.array([v if is_number(v) else np.nan for v in values], dtype=float)


def _peaks(y, limit: int):
    """Indices of about ``limit`` points, each bucket's lowest and highest (pyqtgraph's 'peak' mode), and
    every break: a long curve draws the same picture from a pixel column's worth, and its files stay small."""
    import numpy as np
    n = len(y)
    if n <= limit:
        return np.arange(n)
    buckets = limit // 2
    size = -(-n // buckets)
    padded = np.full(buckets * size, np.nan)
    padded[:n] = y
    grid = padded.reshape(buckets, size)
    base = np.arange(buckets) * size
    with np.errstate(invalid="ignore"):
        lowest = np.where(np.isnan(grid), np.inf, grid).argmin(axis=1)
        highest = np.where(np.isnan(grid), -np.inf, grid).argmax(axis=1)
    gaps = np.flatnonzero(np.isnan(y))  # the breaks (engine/figures/gaps.py): a thinned curve keeps its gaps
    keep = np.unique(np.concatenate([base + lowest, base + highest, gaps, [n - 1]]))
    return keep[keep < n]
