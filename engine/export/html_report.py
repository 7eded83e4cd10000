"""One self-contained HTML file per run or experiment: config, summary, every figure inline, environment.

Self-contained means it can be mailed or attached to an issue: no scripts, no
external style sheets or fonts, figures as inline <svg> (so they stay sharp and
their text stays searchable).
"""
from __future__ import annotations

import datetime as dt
import json
from html import escape
from typing import Iterable

from engine.export.environment import environment
from engine.export.figures import Figure, pct
from engine.export.svg import format_value, is_number
from engine.store import RunRecord

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
    body = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(_cell(v))}</td></tr>" for k, v in rows)
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


def _mean_std(stat, unit: str, factor: float = 1.0) -> str:
    if not isinstance(stat, dict) or not is_number(stat.get("mean")):
        return "—"
    std = stat.get("std")
    spread = f" ± {format_value(std * factor)}" if is_number(std) else ""
    return f"{format_value(stat['mean'] * factor)}{spread} {unit}"


def _ratio(value) -> str:
    return f"{value:.2f}" if is_number(value) else "—"


def _duration(stat) -> str:
    """A step time in ms below a second, in s above (the tutorial's ResNet steps take seconds)."""
    mean = stat.get("mean") if isinstance(stat, dict) else None
    return _mean_std(stat, "ms", 1000.0) if is_number(mean) and mean < 1 else _mean_std(stat, "s")


# ---- what a run's report says --------------------------------------------------------------
def run_summary_rows(run: RunRecord) -> list[tuple[str, object]]:
    s = run.summary or {}
    bubble = s.get("bubble") or {}
    loss = s.get("loss") or {}
    telemetry = s.get("telemetry") or {}
    devices = s.get("devices") or []
    busy = s.get("devices_busy") or []
    duration = run.ended - run.started if is_number(run.ended) and is_number(run.started) else None
    rows = [
        ("status", run.status), ("started", _when(run.started)),
        ("duration", f"{duration:.1f} s" if duration is not None else None),
        ("strategy", s.get("strategy") or run.config.get("strategy")), ("model", s.get("model")),
        ("devices", ", ".join(devices) if devices else None), ("split", s.get("split")),
        ("micro-batches", s.get("micro_batches")), ("schedule", s.get("schedule")),
        ("batch size", s.get("batch_size")),
        ("steps", f"{s['steps']} ({s.get('steps_measured')} measured after warm-up)" if "steps" in s else None),
        ("step time", _duration(s.get("step_time_s"))),
        ("throughput", _mean_std(s.get("throughput"), "samples/s")),
        ("loss", f"{format_value(loss.get('first'))} → {format_value(loss.get('last'))}" if loss else None),
        ("parameter norm", s.get("param_norm")),
        ("parameter change", s.get("param_change")),
        ("busy per device", ", ".join(f"{d} {pct(b)}" for d, b in zip(devices, busy)) or None),
        ("stage balance", _ratio(s.get("stage_balance")) if s.get("stage_balance") is not None else None),
        ("bubble", f"measured {pct(bubble.get('measured'))}, theory {pct(bubble.get('theory'))}"),
    ]
    if telemetry:
        util = telemetry.get("util_mean") or []
        rows.append(("telemetry", f"{telemetry.get('samples')} samples at {telemetry.get('rate_hz')} Hz; mean util "
                     + ", ".join(f"{d} {format_value(u) + '%' if is_number(u) else 'n/a'}"
                                 for d, u in zip(devices, util))))
    for note in s.get("notes") or []:
        rows.append(("note", note))
    if run.experiment_id:
        rows.append(("experiment", f"{run.experiment_id} ({run.label})"))
    if run.error:
        rows.append(("error", run.error.strip().splitlines()[-1] if run.error.strip() else run.error))
    return [(k, v) for k, v in rows if v is not None]


# ---- what an experiment's report says ---------------------------------------------------------
def experiment_config_rows(experiment: dict) -> list[tuple[str, object]]:
    params = experiment.get("params") or {}
    rows = [("preset", experiment.get("name")), ("repeats per point", params.get("repeats"))]
    points = params.get("points")
    if isinstance(points, list):
        rows.append(("points", ", ".join(str(p.get("label")) for p in points if isinstance(p, dict))))
    base = params.get("base")
    if isinstance(base, dict):
        rows += [(f"base {k}", v) for k, v in sorted(base.items())]
    rows += [(k, v) for k, v in sorted(params.items()) if k not in ("repeats", "points", "base")]
    return rows


def experiment_points_table(result: dict) -> str:
    columns = ["point", "strategy", "split", "micro-batches", "step time", "throughput", "bubble", "stage balance",
               "runs"]
    rows = []
    for p in result.get("points") or []:
        if not isinstance(p, dict):
            continue
        bubble = p.get("bubble") if isinstance(p.get("bubble"), dict) else {}
        best = " (best)" if p.get("label") == result.get("best") else ""
        rows.append([f"{p.get('label')}{best}", p.get("strategy"), p.get("split"), p.get("micro_batches"),
                     _duration(p.get("step_time_s")), _mean_std(p.get("throughput"), "samples/s"),
                     pct(bubble.get("measured")), _ratio(p.get("stage_balance")), len(p.get("run_ids") or [])])
    return table(columns, rows)


# ---- the page --------------------------------------------------------------------------------
def page(*, title: str, meta: str, config_html: str, summary_html: str, figures: list[Figure]) -> str:
    figure_html = "\n".join(
        f'<figure id="fig-{escape(f.name)}">\n{f.svg.strip()}\n<figcaption>{escape(f.title)}</figcaption></figure>'
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
    return page(title=f"Splitscope run {run.id}", meta=f"{run.status} · started {_when(run.started)}",
                config_html=key_value_table(sorted(run.config.items())),
                summary_html=key_value_table(run_summary_rows(run)), figures=figures)


def experiment_page(experiment: dict, result: dict, figures: list[Figure]) -> str:
    status = result.get("status") or "finished"
    meta = (f"{experiment.get('name')} · {status} · created {_when(experiment.get('created'))} · "
            f"best: {result.get('best') or '—'}")
    return page(title=f"Splitscope experiment {experiment['id']}", meta=meta,
                config_html=key_value_table(experiment_config_rows(experiment)),
                summary_html=experiment_points_table(result) + "".join(
                    f"<p class=\"note\">{escape(str(note))}</p>" for note in result.get("notes") or []),
                figures=figures)
