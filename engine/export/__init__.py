"""Exports of stored runs and experiments: PNG, SVG, PDF and CSV per figure, or one HTML report.

    from engine.export import export
    paths = export(Store(path), "20261129-182558-2dc4b4", "html", "report.html")

The figures are engine.figures' definitions, the ones the app draws; matplotlib
draws them here (engine/export/drawing.py), imported only when a PNG, SVG, PDF
or HTML file is written: CSV, and the rest of the engine, work without it. No
Qt and no torch at all.
"""
from engine.export.errors import ExportError
from engine.export.figures import experiment_figures, run_figures
from engine.export.writers import FORMATS, csv_text, export, planned_paths

__all__ = ["export", "planned_paths", "csv_text", "ExportError", "FORMATS", "run_figures", "experiment_figures"]
