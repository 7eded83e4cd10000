"""Every figure defined once: what the app draws with pyqtgraph and the exports with matplotlib.

    from engine.figures import RunView, run_figures, experiment_figures
    figures = run_figures(RunView(summary=..., steps=..., samples=..., timeline=...))

Plain data in, ``Figure`` definitions out (engine/figures/figure.py): no Qt, no
matplotlib, no store. engine/export builds the inputs from the store and draws;
the app builds them from what it loaded and draws them on screen.
"""
from engine.figures import palette
from engine.figures.experiment import SWEEP_AXES, experiment_figures
from engine.figures.figure import Axis, Bars, Figure, Lanes, Mark, Series, series_table
from engine.figures.run import RunView, comparison_figures, run_figures
from engine.figures.timeline import timeline_figure

__all__ = ["palette", "Figure", "Series", "Bars", "Lanes", "Mark", "Axis", "series_table", "RunView",
           "run_figures", "comparison_figures", "experiment_figures", "timeline_figure", "SWEEP_AXES"]
