"""Exports of stored runs and experiments: PNG, SVG and CSV per figure, or one HTML report.

    from engine.export import export
    paths = export(Store(path), "20261129-182558-2dc4b4", "html", "report.html")

No Qt at import time: SVG, CSV and HTML work on machines without PySide6; only
PNG needs it (imported when a PNG is written). No torch either.
"""
from engine.export.charts import Mark, Series, bar_chart, line_chart, timeline_chart
from engine.export.errors import ExportError
from engine.export.figures import Figure, experiment_figures, run_figures
from engine.export.writers import FORMATS, export, planned_paths

__all__ = ["export", "planned_paths", "ExportError", "FORMATS", "Figure", "run_figures", "experiment_figures",
           "line_chart", "bar_chart", "timeline_chart", "Series", "Mark"]
