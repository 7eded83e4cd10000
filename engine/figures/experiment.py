"""An experiment's figures, from its result: bars per point, the sweep's curve, bubble, balance and memory.

The app's result view draws the step-time bars and the sweep from these, the
exports all of them. Tables keep SI units (seconds); charts may show ms.
"""
from __future__ import annotations

from collections.abc import Sequence

from engine.figures import palette
from engine.figures.figure import Axis, Bars, Figure, Mark, Segment, Series
from engine.figures.numbers import is_number, scaled, time_unit
from engine.results import ExperimentPoint, ExperimentResult

MIB = 2 ** 20
POINT = Axis("point")
# What each sweep preset sweeps, as its axis says (a sweep of another name: "swept value").
SWEEP_AXES = {"split-size": "split size (samples per micro-batch)",
              "split-point": "split point (first block of stage 2)",
              "dp-scaling": "devices",
              "input-pipeline": "loader workers"}
IDENT_COLUMNS = ["label", "strategy", "split", "micro-batches"]


def sweep_metric(name: str) -> tuple[str, str]:
    """(ExperimentPoint field, its label): dp-scaling and input-pipeline are about throughput, the other sweeps
    about time."""
    return ("throughput", "throughput") if name in ("dp-scaling", "input-pipeline") else ("step_time_s", "step time")


def experiment_figures(result: ExperimentResult, shown_name: str | None = None) -> list[Figure]:
    """The experiment's figures, titled with ``shown_name`` (the preset's name for people,
    engine.experiments.preset_title; its id without it)."""
    points = result.points
    labels = [p.label for p in points]
    best = labels.index(result.winner) if result.winner in labels else None   # none marked when tied
    name = shown_name or result.name
    ident = [[p.label, p.strategy, _compact(p.split), p.micro_batches] for p in points]
    figures = [stat_bars("step-time", f"Step time per point · {name} (mean ± std)", "step time", "s",
                         points, ident, best, "step_time_s"),
               stat_bars("throughput", f"Throughput per point · {name} (mean ± std)", "throughput",
                         "samples/s", points, ident, best, "throughput")]
    if any(is_number(p.x) for p in points):
        figures.append(sweep_figure(result, name))
    if any(is_number(p.input_wait) for p in points):
        figures.append(input_wait_figure(result, name))
    if any(is_number(p.bubble.measured) for p in points):
        figures.append(bubble_figure(name, points, ident))
    if any(is_number(p.stage_balance) for p in points):
        figures.append(value_bars("stage-balance", f"Stage balance per point · {name}", Axis("stage balance"),
                                  [p.stage_balance for p in points], ident))
    if any(is_number(p.mfu) for p in points):
        figures.append(value_bars("mfu", f"MFU per point · {name} (model FLOP/s over the devices' peaks)",
                                  Axis("MFU", "%"), scaled([p.mfu for p in points], 100.0), ident))
    if any(is_number(p.samples_per_joule) for p in points):
        figures.append(value_bars("samples-per-joule", f"Samples per joule per point · {name}",
                                  Axis("samples per joule"), [p.samples_per_joule for p in points], ident))
    if any(p.tensor_memory for p in points):
        figures.append(memory_by_kind_figure(name, points))
    if any(_peak(p) is not None for p in points):
        figures.append(value_bars("peak-memory", f"Peak memory per point (busiest device) · {name}",
                                  Axis("peak memory", "MiB"), scaled([_peak(p) for p in points], 1 / MIB), ident))
    return figures


def _compact(value):
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value


def stat(point: ExperimentPoint, key: str, part: str) -> float | None:
    """A point's mean or std of ``key`` (step_time_s, throughput); None where it has none (a failed point)."""
    value = getattr(point, key)
    return getattr(value, part) if value is not None else None


def _peak(point: ExperimentPoint):
    return max((v for v in point.peak_mem_bytes or [] if is_number(v)), default=None)


def stat_bars(name: str, title: str, label: str, unit: str, points: Sequence[ExperimentPoint], ident, best,
              key: str) -> Figure:
    means = [stat(p, key, "mean") for p in points]
    stds = [stat(p, key, "std") for p in points]
    shown_unit, factor = time_unit(means) if unit == "s" else (unit, 1.0)
    table_unit, to_table = ("ms", 1000.0) if unit == "s" else (unit, 1.0)   # tables: times in ms throughout
    columns = IDENT_COLUMNS + [f"{label} mean ({table_unit})", f"{label} std ({table_unit})"]
    rows = [row + [m, s] for row, m, s in zip(ident, scaled(means, to_table), scaled(stds, to_table), strict=True)]
    if key == "step_time_s":
        columns += ["step time min (ms)", "step time max (ms)"]   # over the runs: the spread "tied" is judged by
        rows = [row + scaled(p.step_time_range or [None, None], 1000.0) for row, p in zip(rows, points, strict=True)]
    columns.append("runs")
    rows = [row + [len(p.run_ids)] for row, p in zip(rows, points, strict=True)]
    if key == "step_time_s" and any(p.predicted_step_s for p in points):
        columns.append("step time predicted (ms)")   # engine.experiments.with_predictions
        rows = [row + scaled([p.predicted_step_s], 1000.0) for row, p in zip(rows, points, strict=True)]
    if any(p.disturbed for p in points):
        columns.append("disturbed")
        rows = [row + [p.disturbed or ""] for row, p in zip(rows, points, strict=True)]
    return Figure(name, title, POINT, Axis(label, shown_unit),
                  bars=Bars([p.label for p in points], scaled(means, factor), scaled(stds, factor), best=best),
                  columns=columns, rows=rows)


def value_bars(name: str, title: str, y: Axis, values: list, ident) -> Figure:
    """Bars of one number per point."""
    return Figure(name, title, POINT, y, bars=Bars([row[0] for row in ident], values),
                  columns=IDENT_COLUMNS + [y.text], rows=[row + [v] for row, v in zip(ident, values, strict=True)])


def sweep_figure(result: ExperimentResult, shown_name: str | None = None) -> Figure:
    """The tutorial's split-size curve: one line per strategy over the swept value, the best marked."""
    points, name = result.points, result.name
    key, label = sweep_metric(name)
    unit, factor = ("samples/s", 1.0) if key == "throughput" else time_unit(stat(p, key, "mean") for p in points)
    swept = _swept(points)
    series = [Series(line, [p.x for p in group], scaled([stat(p, key, "mean") for p in group], factor),
                     palette.series_color(i), width=2.0, yerr=scaled([stat(p, key, "std") for p in group], factor),
                     markers=True)
              for i, (line, group) in enumerate(_lines(points, swept).items())]
    marks = []
    best = result.point(result.winner) if result.winner else None   # none marked when tied
    if best is not None and is_number(best.x):
        y = stat(best, key, "mean")
        marks.append(Mark(best.x, f"best: {best.label}", y * factor if is_number(y) else None))
    automatic = result.automatic_split
    if automatic and len(automatic) == 1 and is_number(automatic[0]):
        marks.append(Mark(automatic[0], "automatic split", color=palette.MUTED))
    x_label = SWEEP_AXES.get(name, "swept value")
    table_unit, to_table = ("samples/s", 1.0) if key == "throughput" else ("ms", 1000.0)  # tables: ms throughout
    columns = ["label", "strategy", x_label, f"{label} mean ({table_unit})", f"{label} std ({table_unit})"]
    rows = [[points[i].label, points[i].strategy, x,
             *scaled([stat(points[i], key, "mean"), stat(points[i], key, "std")], to_table)] for x, i in swept]
    return Figure("sweep", f"{label.capitalize()} over the sweep · {shown_name or name} (mean ± std)", Axis(x_label),
                  Axis(label, unit), series=series, marks=marks, columns=columns, rows=rows)


def _swept(points: Sequence[ExperimentPoint]) -> list[tuple[float, int]]:
    """(swept value, index) of the points that have one, in the sweep's order."""
    return sorted((p.x, i) for i, p in enumerate(points) if is_number(p.x))


def _lines(points: Sequence[ExperimentPoint], swept: list[tuple[float, int]]) -> dict[str, list[ExperimentPoint]]:
    """The swept points by the line they are on (their series, else their strategy), in the sweep's order."""
    lines: dict[str, list[ExperimentPoint]] = {}
    for _, i in swept:
        lines.setdefault(str(points[i].series or points[i].strategy or "points"), []).append(points[i])
    return lines


def input_wait_figure(result: ExperimentResult, shown_name: str | None = None) -> Figure:
    """The share of its step the most starved device waits on its input, over the sweep (the loader's workers)
    or per point."""
    points, name = result.points, result.name
    swept = _swept(points)
    axis = Axis("input wait", "% of step time")
    columns = ["label", "strategy", SWEEP_AXES.get(name, "swept value"), "input wait (%)"]
    rows = [[points[i].label, points[i].strategy, x, *scaled([points[i].input_wait], 100)] for x, i in swept]
    title = f"Input wait (the device waiting most on data) · {shown_name or name}"
    if not swept:
        return value_bars("input-wait", title, axis, scaled([p.input_wait for p in points], 100),
                          [[p.label, p.strategy, _compact(p.split), p.micro_batches] for p in points])
    series = [Series(line, [p.x for p in group], scaled([p.input_wait for p in group], 100),
                     palette.series_color(i), width=2.0, markers=True)
              for i, (line, group) in enumerate(_lines(points, swept).items())]
    return Figure("input-wait", title, Axis(SWEEP_AXES.get(name, "swept value")), axis, series=series,
                  columns=columns, rows=rows)


def bubble_figure(name: str, points: Sequence[ExperimentPoint], ident) -> Figure:
    measured = scaled([p.bubble.measured for p in points], 100)
    theory = scaled([p.bubble.theory for p in points], 100)
    return Figure("bubble", f"Bubble per point · {name} (bars measured, dashes theory)", POINT,
                  Axis("bubble", "% of step time"),
                  bars=Bars([p.label for p in points], measured, refs=theory, ref_label="theory (p-1)/(m+p-1)"),
                  columns=IDENT_COLUMNS + ["bubble measured (%)", "bubble theory (%)"],
                  rows=[row + [m, t] for row, m, t in zip(ident, measured, theory, strict=True)])


def _device_mean(values: list) -> float | None:
    numbers = [v for v in values if is_number(v)]
    return sum(numbers) / len(numbers) if numbers else None


def memory_by_kind_figure(name: str, points: Sequence[ExperimentPoint]) -> Figure:
    """Each point's tensor memory per device (the mean over its devices), stacked by kind, with its step time
    and the bytes its devices moved per step beside it in the table."""
    from engine.figures.run import MEMORY_KINDS
    # "other" only where every point has it (engine/figures/run.py tensor_memory_figure says why)
    memories = [m for p in points for m in p.tensor_memory or [] if m is not None]
    kinds = [k for k in MEMORY_KINDS if k != "other" or (memories and all(m.other is not None for m in memories))]
    rows = []
    for p in points:
        memories = [m for m in p.tensor_memory or [] if m is not None]
        per_kind = [_device_mean([getattr(m, k) for m in memories]) for k in kinds]
        moved = _device_mean([c.bytes for c in p.communication or [] if c is not None])
        rows.append([p.label, *(v / MIB if v is not None else None for v in per_kind),
                     sum(v for v in per_kind if v is not None) / MIB if memories else None,
                     stat(p, "step_time_s", "mean") * 1e3 if p.step_time_s else None,
                     moved / MIB if moved is not None else (0.0 if memories else None)])
    segments = [Segment(k, [r[1 + i] for r in rows], palette.MEMORY_COLORS[k]) for i, k in enumerate(kinds)]
    return Figure("memory-by-kind", f"Tensor memory per device by kind · {name}", Axis("point"),
                  Axis("tensor memory per device", "MiB"),
                  bars=Bars([r[0] for r in rows], [r[1 + len(kinds)] for r in rows], segments=segments),
                  columns=["point", *(f"{k} (MiB)" for k in kinds), "total (MiB)", "step time (ms)",
                           "moved per step (MiB)"], rows=rows)
