"""``export(store, id, fmt, out)``: a run's or an experiment's figures as PNG, SVG, PDF, CSV files or one HTML report.

PNG, SVG, PDF and CSV write one file per figure into the folder ``out``, named
``<id>-<figure>.<ext>``; HTML writes the single file ``out``; trace writes a run's (or an
experiment's runs', one after another) Chrome Trace Event JSON (engine/export/trace.py) to the file ``out`` (or
``<id>.trace.json`` in a folder). Nothing existing
is overwritten unless ``force``: every target is checked before the first byte
is written, so a refused export leaves no half-written set behind. Everything
but CSV is drawn by matplotlib (engine/export/drawing.py); where it is missing
the export says so before it creates anything.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from engine.experiments import stored_result
from engine.export import drawing
from engine.export.errors import ExportError
from engine.export.figures import experiment_figures, run_figures
from engine.export.html_report import experiment_page, run_page
from engine.export.trace import write_trace
from engine.figures import Figure
from engine.figures.numbers import table_value
from engine.store import Store

FORMATS = ("png", "svg", "pdf", "csv", "html", "trace")


def resolve(store: Store, item_id: str) -> tuple[str, object]:
    """("run", RunRecord) or ("experiment", dict). Experiment ids start with "exp-"; others may be either."""
    if not item_id.startswith("exp-"):
        run = store.get_run(item_id)
        if run is not None:
            return "run", run
    experiment = store.get_experiment(item_id)
    if experiment is not None:
        return "experiment", experiment
    raise ExportError(f"no run or experiment with id {item_id!r} in {store.path} "
                      "(`python main.py runs` lists the stored runs)")


def csv_text(figure: Figure) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(figure.columns)
    writer.writerows([[table_value(v) for v in row] for row in figure.rows])
    return buffer.getvalue()


def _refuse_existing(paths: list[Path], force: bool) -> None:
    if force:
        return
    existing = [p for p in paths if p.exists()]
    if existing:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise ExportError(f"{existing[0]} already exists{more}; pass --force to overwrite")


def _targets(item_id: str, fmt: str, out: Path, figures: list[Figure]) -> list[Path]:
    """The files an export writes: ``<id>-<figure>.<fmt>`` in a folder, or one report."""
    if fmt == "html":
        # a folder given for a report: put <id>.html in it
        return [out / f"{item_id}.html" if out.is_dir() else out]
    if fmt == "trace":
        return [out / f"{item_id}.trace.json" if out.is_dir() else out]
    return [out / f"{item_id}-{f.name}.{fmt}" for f in figures]


def _prepare(store: Store, item_id: str, fmt: str):
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ExportError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    kind, item = resolve(store, item_id)
    figures = run_figures(store, item.id) if kind == "run" else experiment_figures(store, item.id)
    return fmt, kind, item, figures


def planned_paths(store: Store, item_id: str, fmt: str, out: str | Path) -> list[Path]:
    """The files ``export`` would write, so a caller can ask before replacing existing ones."""
    fmt, _, _, figures = _prepare(store, item_id, fmt)
    return _targets(item_id, fmt, Path(out), figures)


def export(store: Store, item_id: str, fmt: str, out: str | Path, *, force: bool = False) -> list[Path]:
    """Write the export and return the paths written."""
    fmt, kind, item, figures = _prepare(store, item_id, fmt)
    out = Path(out)
    if fmt == "trace":
        (path,) = _targets(item_id, fmt, out, figures)
        _refuse_existing([path], force)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_trace(store, item.id, path, kind)
        return [path]
    if fmt != "csv":
        drawing.require()

    if fmt == "html":
        (path,) = _targets(item_id, fmt, out, figures)
        _refuse_existing([path], force)
        text = (run_page(item, figures) if kind == "run"
                else experiment_page(item, stored_result(store, item), figures))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return [path]

    if out.exists() and not out.is_dir():
        raise ExportError(f"--out must be a folder for {fmt} (one file per figure), but {out} is a file")
    paths = _targets(item_id, fmt, out, figures)
    _refuse_existing(paths, force)
    out.mkdir(parents=True, exist_ok=True)
    for figure, path in zip(figures, paths, strict=True):
        if fmt == "csv":
            path.write_text(csv_text(figure), encoding="utf-8", newline="")
        else:
            drawing.write(figure, fmt, path)
    return paths
