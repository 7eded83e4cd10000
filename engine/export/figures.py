"""The figures of a stored run or experiment: each a chart (SVG) and the table behind it.

A ``Figure`` is what every export format is made of: PNG and SVG draw its
``svg``, CSV writes its ``columns`` (units in the header) and ``rows``, the HTML
report embeds it. The tables hold SI values as stored (seconds, bytes as MiB,
samples/s); the charts may show friendlier units (ms) and say so on the axis.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.export.charts import Mark, Series, bar_chart, line_chart, timeline_chart
from engine.telemetry.smooth import SMOOTH_S, trailing_mean
from engine.export.errors import ExportError
from engine.export.svg import MUTED, color, is_number
from engine.experiments import stored_result
from engine.store import Store

TIMELINE_STEPS = 5
EXPORT_ROWS = 100_000   # at most this many step rows, and telemetry rows, in a run's figures
MIB = 2 ** 20
DASHES = [None, "8 5", "2 4", "10 4 2 4"]


@dataclass
class Figure:
    name: str                  # slug for file names: <id>-<name>.<ext>
    title: str
    svg: str
    columns: list[str]         # CSV header, units in brackets: "t (s)", "util cuda:0 (%)"
    rows: list[list] = field(default_factory=list)


def pct(value) -> str:
    return f"{value:.1%}" if is_number(value) else "n/a"


def time_unit(values) -> tuple[str, float]:
    """Milliseconds when every value is under a second: "7.1 ms" reads better than "0.0071 s"."""
    finite = [abs(v) for v in values if is_number(v)]
    return ("ms", 1000.0) if finite and max(finite) < 1 else ("s", 1.0)


def scaled(values, factor: float) -> list:
    return [v * factor if is_number(v) else None for v in values]


# ---- a run ---------------------------------------------------------------------------------
def run_figures(store: Store, run_id: str) -> list[Figure]:
    run = store.get_run(run_id)
    if run is None:
        raise ExportError(f"no run with id {run_id!r}")
    summary = run.summary or {}
    # A long run's figures from every k-th step and bucketed telemetry: the charts draw a pixel column's
    # worth either way, and an export must not load a day of rows into memory.
    rows, span = store.sample_span(run_id)
    samples = store.samples(run_id, bucket_s=span / EXPORT_ROWS if rows > EXPORT_ROWS else None)
    steps = store.steps(run_id, at_most=EXPORT_ROWS)
    step_count = store.step_count(run_id)
    kept_count = store.timeline_step_count(run_id)
    kept = store.timeline_steps(run_id, last=TIMELINE_STEPS)  # every step's, or a sample (engine.timeline_keeper)
    devices = _device_order(summary.get("devices") or [], [s["device"] for s in samples])
    # Titles (and so the SVG, PNG and HTML) say when a figure and its CSV hold a thinned view.
    of_steps = f" (1 step in {-(-step_count // EXPORT_ROWS)} of {step_count:,})" if step_count > EXPORT_ROWS else ""
    of_samples = f" ({span / EXPORT_ROWS:.2g}-s means of {rows:,} samples)" if rows > EXPORT_ROWS else ""
    figures = [
        _telemetry_figure("utilization", "Utilization per device" + of_samples, samples, devices, "util", "%", 1.0,
                          y_range=(0, 100)),
        _telemetry_figure("memory", "Memory used per device" + of_samples, samples, devices, "mem_used", "MiB",
                          1 / MIB, y_range=(0, None)),
        _step_figure("throughput", "Throughput per step" + of_steps, steps, "throughput", "throughput", "samples/s",
                     run.config.get("warmup")),
        _step_time_figure(steps, run.config.get("warmup"), "Step time per step" + of_steps),
        _step_figure("loss", "Loss per step" + of_steps, steps, "loss", "loss", None, run.config.get("warmup")),
        _timeline_figure(store.timeline(run_id, steps=kept), steps, devices, summary, kept=(kept_count, step_count)),
        _busy_figure(devices, summary),
    ]
    if any(s.get("batch_split") for s in steps):
        figures.append(_batch_split_figure(steps, devices))
    return figures


def _device_order(summary_devices: list[str], sampled: list[str]) -> list[str]:
    order = list(summary_devices)
    for d in sampled:
        if d not in order:
            order.append(d)
    return order


def _telemetry_figure(name, title, samples, devices, field_name, unit, factor, y_range=None) -> Figure:
    """One column per device, one row per sampling instant (the sampler reads all devices at once).

    Utilization also gets each device's one-second mean (engine.telemetry.smooth), drawn over the faint
    raw samples as the app draws it, with a column of its own."""
    by_t: dict[float, dict[str, float]] = {}
    for s in samples:
        if s.get(field_name) is not None:
            by_t.setdefault(s["t"], {})[s["device"]] = s[field_name] * factor
    label = {"util": "util", "mem_used": "mem"}[field_name]
    columns = ["t (s)"] + [f"{label} {d} ({unit})" for d in devices]
    rows = [[t] + [values.get(d) for d in devices] for t, values in sorted(by_t.items())]
    series = [Series(d, [r[0] for r in rows], [r[1 + i] for r in rows]) for i, d in enumerate(devices)]
    if field_name == "util":
        means = []
        for i, d in enumerate(devices):
            measured = [(r[0], r[1 + i]) for r in rows if r[1 + i] is not None]
            mean = dict(zip((t for t, _ in measured), trailing_mean(*zip(*measured)) if measured else []))
            means.append(mean)
        columns += [f"{label} {d} {SMOOTH_S:g}-s mean ({unit})" for d in devices]
        for r in rows:
            r.extend(mean.get(r[0]) for mean in means)
        series = [Series(f"{s.name} raw", s.xs, s.ys, style={"color": color(i), "opacity": 0.3, "width": 1,
                                                             "legend": False})
                  for i, s in enumerate(series)]
        series += [Series(d, list(m), list(m.values()), style={"color": color(i)}) for i, (d, m)
                   in enumerate(zip(devices, means))]
    ylabel = {"util": "utilization (%)", "mem_used": "memory used (MiB)"}[field_name]
    svg = line_chart(series, title=title, xlabel="time since the run started (s)", ylabel=ylabel, y_range=y_range)
    return Figure(name, title, svg, columns, rows)


def _warmup_marks(warmup) -> list[Mark]:
    # steps before this line are warm-up: the summary leaves them out
    return [Mark(warmup - 0.5, "warm-up ends", color=MUTED)] if is_number(warmup) and warmup > 0 else []


def _step_figure(name, title, steps, key, label, unit, warmup) -> Figure:
    heading = f"{label} ({unit})" if unit else label
    rows = [[s["step"], s.get(key)] for s in steps]
    svg = line_chart([Series(label, [r[0] for r in rows], [r[1] for r in rows])], title=title, xlabel="step",
                     ylabel=heading, marks=_warmup_marks(warmup) if rows else None)
    return Figure(name, title, svg, ["step", heading], rows)


def _step_time_figure(steps, warmup, title: str) -> Figure:
    rows = [[s["step"], s.get("time_s")] for s in steps]
    unit, factor = time_unit(r[1] for r in rows)
    svg = line_chart([Series("step time", [r[0] for r in rows], scaled([r[1] for r in rows], factor))],
                     title=title, xlabel="step", ylabel=f"step time ({unit})",
                     marks=_warmup_marks(warmup) if rows else None)
    return Figure("step-time", title, svg, ["step", "step time (s)"], rows)


def _timeline_figure(timeline, steps, devices, summary, kept: tuple[int, int] | None = None) -> Figure:
    """``kept``: (steps whose intervals are stored, steps), to say when the timelines are a sample."""
    shown = sorted({row[0] for row in timeline})[-TIMELINE_STEPS:]
    picked = [row for row in timeline if row[0] in shown]
    lanes = {d: [] for d in _device_order(devices, [row[1] for row in picked])}
    for _, device, kind, t0, t1 in picked:
        lanes[device].append((kind, t0, t1))
    ends = {s["step"]: s.get("t") for s in steps if s["step"] in shown}
    t_range = None
    if picked:
        # a step starts where the previous one ended (engine.summary.StepMerger): include that lead-in
        first = next((s for s in steps if s["step"] == shown[0]), None)
        start = min(r[3] for r in picked)
        if first and is_number(first.get("t")) and is_number(first.get("time_s")):
            start = min(start, first["t"] - first["time_s"])
        end = max([r[4] for r in picked] + [e for e in ends.values() if is_number(e)])
        t_range = (start, end)
    bubble = summary.get("bubble") or {}
    title = (f"Timeline of the last {len(shown) or TIMELINE_STEPS} steps · bubble measured "
             f"{pct(bubble.get('measured'))}, theory {pct(bubble.get('theory'))}")
    if kept is not None and kept[0] < kept[1]:
        title += f" · full timelines kept for {kept[0]:,} of {kept[1]:,} steps"
    boundaries = [ends[s] for s in shown[:-1] if is_number(ends.get(s))]
    svg = timeline_chart({d: v for d, v in lanes.items()}, title=title, t_range=t_range, boundaries=boundaries)
    return Figure("timeline", title, svg, ["step", "device", "kind", "t0 (s)", "t1 (s)"],
                  [list(row) for row in picked])


def _busy_figure(devices, summary) -> Figure:
    busy = summary.get("devices_busy") or []
    names = list(summary.get("devices") or devices)[:len(busy)]
    rows = [[d, b * 100, 100 - b * 100] if is_number(b) else [d, None, None] for d, b in zip(names, busy)]
    title = f"Busy share of step time per device · bubble {pct((summary.get('bubble') or {}).get('measured'))}"
    svg = bar_chart([r[0] for r in rows], [r[1] for r in rows], title=title, ylabel="busy (% of step time)")
    return Figure("busy", title, svg, ["device", "busy (%)", "idle (%)"], rows)


def _batch_split_figure(steps, devices) -> Figure:
    split_steps = [s for s in steps if s.get("batch_split")]
    width = max(len(s["batch_split"]) for s in split_steps)
    names = (list(devices) + [f"device {i}" for i in range(len(devices), width)])[:width]
    rows = [[s["step"]] + [s["batch_split"][i] if i < len(s["batch_split"]) else None for i in range(width)]
            for s in split_steps]
    # devices often get the same count: dashes keep every line visible where they overlap
    series = [Series(d, [r[0] for r in rows], [r[1 + i] for r in rows],
                     style={"dash": DASHES[i % len(DASHES)], "width": 4 if i == 0 else 2})
              for i, d in enumerate(names)]
    title = "Samples each device got per step"
    svg = line_chart(series, title=title, xlabel="step", ylabel="samples", y_range=(0, None))
    return Figure("batch-split", title, svg, ["step"] + [f"batch {d} (samples)" for d in names], rows)


# ---- an experiment -------------------------------------------------------------------------------
SWEEP_AXES = {"split-size": "split size (samples per micro-batch)",
              "split-point": "split point (first block of stage 2)",
              "dp-scaling": "devices"}


def experiment_figures(store: Store, experiment_id: str) -> list[Figure]:
    experiment = store.get_experiment(experiment_id)
    if experiment is None:
        raise ExportError(f"no experiment with id {experiment_id!r}")
    result = stored_result(store, experiment)
    points = [p for p in result.get("points") or [] if isinstance(p, dict)]
    labels = [str(p.get("label") or f"point {i + 1}") for i, p in enumerate(points)]
    best = labels.index(result["best"]) if result.get("best") in labels else None
    name = result.get("name") or experiment["name"]
    ident = [[label, p.get("strategy"), _compact(p.get("split")), p.get("micro_batches")]
             for label, p in zip(labels, points)]
    figures = [_stat_bars("step-time", f"Step time per point · {name} (mean ± std)", "step time", "s",
                          points, labels, ident, best, "step_time_s"),
               _stat_bars("throughput", f"Throughput per point · {name} (mean ± std)", "throughput",
                          "samples/s", points, labels, ident, best, "throughput")]
    if any(is_number(p.get("x")) for p in points):
        figures.append(_sweep_figure(name, result, points, labels, best))
    if any(is_number((p.get("bubble") or {}).get("measured")) for p in points if isinstance(p.get("bubble"), dict)):
        figures.append(_bubble_figure(name, points, labels, ident))
    if any(is_number(p.get("stage_balance")) for p in points):
        figures.append(_value_bars("stage-balance", f"Stage balance per point · {name}", "stage balance", None,
                                   [p.get("stage_balance") for p in points], labels, ident, 1.0))
    if any(_peak(p) is not None for p in points):
        figures.append(_value_bars("peak-memory", f"Peak memory per point (busiest device) · {name}",
                                   "peak memory", "MiB", [_peak(p) for p in points], labels, ident, 1 / MIB))
    return figures


def _compact(value):
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value


def _stat(point: dict, key: str, part: str):
    value = point.get(key)
    return value.get(part) if isinstance(value, dict) and is_number(value.get(part)) else None


def _peak(point: dict):
    value = point.get("peak_mem_bytes")
    if isinstance(value, (list, tuple)):
        value = max((v for v in value if is_number(v)), default=None)
    return value if is_number(value) else None


def _stat_bars(name, title, label, unit, points, labels, ident, best, key) -> Figure:
    means = [_stat(p, key, "mean") for p in points]
    stds = [_stat(p, key, "std") for p in points]
    shown_unit, factor = time_unit(means) if unit == "s" else (unit, 1.0)
    svg = bar_chart(labels, scaled(means, factor), scaled(stds, factor), title=title,
                    ylabel=f"{label} ({shown_unit})", highlight=best)
    columns = ["label", "strategy", "split", "micro-batches", f"{label} mean ({unit})", f"{label} std ({unit})",
               "runs"]
    rows = [row + [m, s, len(p.get("run_ids") or [])] for row, m, s, p in zip(ident, means, stds, points)]
    return Figure(name, title, svg, columns, rows)


def _value_bars(name, title, label, unit, values, labels, ident, factor) -> Figure:
    """Bars of one number per point; ``unit`` None for a plain ratio."""
    values = scaled(values, factor)
    heading = f"{label} ({unit})" if unit else label
    svg = bar_chart(labels, values, title=title, ylabel=heading)
    return Figure(name, title, svg, ["label", "strategy", "split", "micro-batches", heading],
                  [row + [v] for row, v in zip(ident, values)])


def _sweep_figure(name, result, points, labels, best) -> Figure:
    """The tutorial's split-size curve: one line per strategy over the swept value, the best marked."""
    metric, metric_label = ("throughput", "throughput") if name == "dp-scaling" else ("step_time_s", "step time")
    unit, factor = ("samples/s", 1.0) if metric == "throughput" else time_unit(_stat(p, metric, "mean") for p in points)
    swept = sorted((p["x"], i) for i, p in enumerate(points) if is_number(p.get("x")))
    by_strategy: dict[str, list[int]] = {}
    for _, i in swept:
        by_strategy.setdefault(str(points[i].get("strategy") or "points"), []).append(i)
    series = [Series(strategy, [points[i]["x"] for i in idx],
                     scaled([_stat(points[i], metric, "mean") for i in idx], factor),
                     yerr=scaled([_stat(points[i], metric, "std") for i in idx], factor))
              for strategy, idx in by_strategy.items()]
    marks = []
    if best is not None and is_number(points[best].get("x")):
        y = _stat(points[best], metric, "mean")
        marks.append(Mark(points[best]["x"], "best", y * factor if is_number(y) else None))
    automatic = result.get("automatic_split")
    if isinstance(automatic, list) and len(automatic) == 1 and is_number(automatic[0]):
        marks.append(Mark(automatic[0], "automatic split", color=MUTED))
    xlabel = result.get("x_label") or SWEEP_AXES.get(name, "swept value")
    title = f"{metric_label.capitalize()} over the sweep · {name} (mean ± std)"
    svg = line_chart(series, title=title, xlabel=xlabel, ylabel=f"{metric_label} ({unit})", marks=marks)
    table_unit = "samples/s" if metric == "throughput" else "s"  # tables keep SI units, charts may show ms
    columns = ["label", "strategy", xlabel, f"{metric_label} mean ({table_unit})", f"{metric_label} std ({table_unit})"]
    rows = [[labels[i], points[i].get("strategy"), x, _stat(points[i], metric, "mean"), _stat(points[i], metric, "std")]
            for x, i in swept]
    return Figure("sweep", title, svg, columns, rows)


def _bubble_figure(name, points, labels, ident) -> Figure:
    measured = [(p.get("bubble") or {}).get("measured") if isinstance(p.get("bubble"), dict) else None
                for p in points]
    theory = [(p.get("bubble") or {}).get("theory") if isinstance(p.get("bubble"), dict) else None for p in points]
    title = f"Bubble per point · {name} (bars measured, dashes theory)"
    svg = bar_chart(labels, scaled(measured, 100), title=title, ylabel="bubble (% of step time)",
                    refs=scaled(theory, 100), ref_label="theory (p-1)/(m+p-1)")
    rows = [row + [m * 100 if is_number(m) else None, t * 100 if is_number(t) else None]
            for row, m, t in zip(ident, measured, theory)]
    return Figure("bubble", title, svg,
                  ["label", "strategy", "split", "micro-batches", "bubble measured (%)", "bubble theory (%)"], rows)
