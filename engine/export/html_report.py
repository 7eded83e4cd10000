"""One self-contained HTML file per run or experiment: config, summary, every figure inline, environment.

Self-contained means it can be mailed or attached to an issue: no scripts, no
external style sheets or fonts, figures as matplotlib's inline <svg>
(engine/export/drawing.py: they stay sharp and their text stays searchable).
"""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from html import escape

from engine.export.drawing import inline_svg
from engine.export.environment import environment
from engine.export.standing import standing, summary_line
from engine.figures import Figure
from engine.figures.numbers import format_value, is_number, pct
from engine.record import by_node
from engine.results import ExperimentResult, MeanStd, RunSummary, to_json
from engine.store import ExperimentRecord, RunRecord

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 2rem auto;
       max-width: 980px; padding: 0 1rem; line-height: 1.45; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem;
     border-bottom: 1px solid #e6e6e6; padding-bottom: .3rem; }
.meta { color: #666; margin-top: 0; }
table { border-collapse: collapse; font-size: .9rem; margin: .5rem 0; }
th, td { text-align: left; padding: .25rem .8rem .25rem 0; border-bottom: 1px solid #f0f0f0; vertical-align: top; }
th { color: #555; font-weight: 600; }
td.num { font-variant-numeric: tabular-nums; }
td.lines { white-space: pre; font-family: ui-monospace, monospace; font-size: .9em; }
figure { margin: 1.5rem 0; } figure svg { width: 100%; height: auto; display: block; }
figcaption { color: #666; font-size: .85rem; }
footer { color: #888; font-size: .8rem; margin-top: 3rem; }
"""


def _cell(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return format_value(value)
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value)
    return str(value)


def key_value_table(rows: Iterable[tuple[str, object]]) -> str:
    # A value of several lines (a run's table by node) keeps its lines and columns.
    def cell(value) -> str:
        text = _cell(value)
        return f'<td class="lines">{escape(text)}</td>' if "\n" in text else f"<td>{escape(text)}</td>"
    body = "".join(f"<tr><th>{escape(str(k))}</th>{cell(v)}</tr>" for k, v in rows)
    return f"<table>{body}</table>"


def table(columns: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td class=\"num\">{escape(_cell(v))}</td>" if is_number(v)
                                    else f"<td>{escape(_cell(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _when(timestamp) -> str:
    if not is_number(timestamp):
        return "—"
    return dt.datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _mean_std(stat: MeanStd | None, unit: str, factor: float = 1.0) -> str:
    if stat is None or not is_number(stat.mean):
        return "—"
    spread = f" ± {format_value(stat.std * factor)}" if is_number(stat.std) else ""
    return f"{format_value(stat.mean * factor)}{spread} {unit}"


def _ratio(value) -> str:
    return f"{value:.2f}" if is_number(value) else "—"


def _duration(stat: MeanStd | None) -> str:
    """A step time in ms below a second, in s above (the tutorial's ResNet steps take seconds)."""
    return _mean_std(stat, "ms", 1000.0) if stat is not None and stat.mean < 1 else _mean_std(stat, "s")


# ---- what a run's report says --------------------------------------------------------------
def run_summary_rows(run: RunRecord) -> list[tuple[str, object]]:
    s = run.summary or RunSummary()
    duration = run.ended - run.started if is_number(run.ended) and is_number(run.started) else None
    if by_node.rolled_up(s):   # a run of many devices: node by node (engine/record/by_node.py)
        return _rolled_up_rows(run, s, duration)
    rows = [
        ("status", run.status), ("started", _when(run.started)),
        ("duration", f"{duration:.1f} s" if duration is not None else None),
        ("strategy", s.strategy or run.config.strategy), ("model", s.model or None),
        ("devices", ", ".join(s.devices) or None), ("split", s.split),
        ("micro-batches", s.micro_batches), ("schedule", s.schedule),
        ("batch size", s.batch_size),
        ("steps", f"{s.steps} ({s.steps_measured} measured after warm-up)" if run.summary else None),
        ("step time", _duration(s.step_time_s)),
        ("throughput", _mean_std(s.throughput, "samples/s")),
        ("loss", f"{format_value(s.loss.first)} → {format_value(s.loss.last)}" if s.loss else None),
        ("parameter norm", s.param_norm),
        ("parameter change", s.param_change),
        ("busy per device", ", ".join(f"{d} {pct(b)}" for d, b in zip(s.devices, s.devices_busy, strict=False))
         or None),
        ("optimizer", f"{s.optimizer}, {s.dtype}" if s.optimizer else None),
        ("tensor memory", "; ".join(f"{d} {m.text()}" for d, m in zip(s.devices, s.tensor_memory or [], strict=False)
                                    if m is not None) or None),
        ("step peak (torch's FSDPMemTracker)", "; ".join(f"{d} {m.step_peak_text()}" for d, m in
                                                        zip(s.devices, s.tensor_memory or [], strict=False)
                                                        if m is not None and m.step_peak) or None),
        ("communication", "; ".join(f"{d} {c.text()}" for d, c in zip(s.devices, s.communication or [], strict=False)
                                    if c is not None) or None),
        ("stage balance", _ratio(s.stage_balance) if s.stage_balance is not None else None),
        ("bubble", f"measured {pct(s.bubble.measured)}, theory {pct(s.bubble.theory)}"),
        ("efficiency", "; ".join(s.efficiency.lines()) if s.efficiency else None),
        ("disturbed", f"{s.telemetry.disturbed}: its times are not comparable"
         if s.telemetry and s.telemetry.disturbed else None),
    ]
    rows += [("finding" if i else "findings", f"{f.severity}: {f.text}") for i, f in enumerate(s.findings)]
    if s.telemetry:
        rows.append(("telemetry", f"{s.telemetry.samples} samples at {s.telemetry.rate_hz} Hz; mean util "
                     + ", ".join(f"{d} {format_value(u) + '%' if is_number(u) else 'n/a'}"
                                 for d, u in zip(s.devices, s.telemetry.util_mean, strict=False))))
    for note in s.notes:
        rows.append(("note", note))
    if run.experiment_id:
        rows.append(("experiment", f"{run.experiment_id} ({run.label})"))
    if run.error:
        rows.append(("error", run.error.strip().splitlines()[-1] if run.error.strip() else run.error))
    return [(k, v) for k, v in rows if v is not None]


def _rolled_up_rows(run: RunRecord, s: RunSummary, duration: float | None) -> list[tuple[str, object]]:
    rows = [
        ("status", run.status), ("started", _when(run.started)),
        ("duration", f"{duration:.1f} s" if duration is not None else None),
        ("strategy", s.strategy or run.config.strategy), ("model", s.model or None),
        ("devices", by_node.devices_text(s)), ("batch size", s.batch_size),
        ("steps", f"{s.steps} ({s.steps_measured} measured after warm-up)"),
        ("step time", _duration(s.step_time_s)), ("throughput", _mean_std(s.throughput, "samples/s")),
        ("loss", f"{format_value(s.loss.first)} → {format_value(s.loss.last)}" if s.loss else None),
        ("bubble", f"measured {pct(s.bubble.measured)}"),
        ("by node", "\n".join(by_node.node_table(s))),
        ("look here first", "\n".join(by_node.outlier_lines(s)) or None),
        ("per device", by_node.PER_DEVICE),
        *(("note", note) for note in s.notes)]
    return [(k, v) for k, v in rows if v is not None]


# ---- what an experiment's report says ---------------------------------------------------------
def experiment_config_rows(experiment: ExperimentRecord) -> list[tuple[str, object]]:
    plan = experiment.plan
    rows: list[tuple[str, object]] = [("preset", experiment.name), ("repeats per point", plan.repeats)]
    if plan.points:
        rows.append(("points", ", ".join(p.label for p in plan.points)))
    rows += [(f"base {k}", v) for k, v in sorted(plan.base.items())]
    return rows


def experiment_points_table(result: ExperimentResult) -> str:
    """The points a row each, its standing beside its label ("(best)", "(tied)") and, where a run of any was
    disturbed, a column saying which; under it the line that sums the result up."""
    columns = ["point", "strategy", "split", "micro-batches", "step time", "predicted (what-if)", "throughput",
               "bubble", "stage balance", "MFU", "samples/J", "runs"]
    rows = [[_labelled(result, p.label), p.strategy, p.split, p.micro_batches,
             _duration(p.step_time_s), _duration(MeanStd(p.predicted_step_s, None)) if p.predicted_step_s else "—",
             _mean_std(p.throughput, "samples/s"),
             pct(p.bubble.measured),
             _ratio(p.stage_balance), pct(p.mfu), format_value(p.samples_per_joule), len(p.run_ids)]
            for p in result.points]
    if any(p.disturbed for p in result.points):
        columns.append("disturbed")
        rows = [row + [p.disturbed or ""] for row, p in zip(rows, result.points, strict=True)]
    return table(columns, rows) + f'<p class="verdict">{escape(summary_line(result))}</p>'


def _labelled(result: ExperimentResult, label: str) -> str:
    mark = standing(result, label)
    return f"{label} ({mark})" if mark else label


# ---- the page --------------------------------------------------------------------------------
def page(*, title: str, meta: str, config_html: str, summary_html: str, figures: list[Figure]) -> str:
    figure_html = "\n".join(
        f'<figure id="fig-{escape(f.name)}">\n{inline_svg(f)}\n<figcaption>{escape(f.title)}</figcaption></figure>'
        for f in figures)
    made = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>{escape(title)}</h1>
<p class="meta">{escape(meta)}</p>
<h2>Configuration</h2>
{config_html}
<h2>Summary</h2>
{summary_html}
<h2>Figures</h2>
{figure_html}
<h2>Environment</h2>
{key_value_table(environment())}
<footer>Made by Splitscope on {escape(made)}.</footer>
</body>
</html>
"""


def run_page(run: RunRecord, figures: list[Figure]) -> str:
    traces = run.summary.traces if run.summary else None
    # a run read from profiler traces was configured by nothing but where they were and how they were read
    config = sorted((to_json(traces) if traces else run.config.to_dict()).items())
    return page(title=f"Splitscope run {run.id}", meta=f"{run.status} · started {_when(run.started)}",
                config_html=key_value_table(config),
                summary_html=key_value_table(run_summary_rows(run)), figures=figures)


def experiment_page(experiment: ExperimentRecord, result: ExperimentResult, figures: list[Figure]) -> str:
    meta = (f"{experiment.name} · {result.status} · created {_when(experiment.created)} · "
            f"{result.verdict() or 'best: —'}")
    return page(title=f"Splitscope experiment {experiment.id}", meta=meta,
                config_html=key_value_table(experiment_config_rows(experiment)),
                summary_html=experiment_points_table(result) + "".join(
                    f"<p class=\"note\">{escape(str(note))}</p>" for note in result.notes),
                figures=figures)
