"""The Plots tab (panel.py PlotPanel) and the plots it and the other views draw with: SeriesPlot, HeatmapPlot,
the timeline, their axes, legend, hover and export, and the parts of the tab (the live grid, the timeline row
with its bubble box, the outlier list)."""
