"""A point's standing in an experiment, as every export's table says it: "best", "tied" (within the fastest's
spread: then no point is best), or nothing; and the line that sums up the result and its disturbed runs."""
from __future__ import annotations

from engine.results import ExperimentResult


def standing(result: ExperimentResult, label: str) -> str:
    """"best", "tied" or "" for the point ``label`` (ExperimentResult.winner and .tied)."""
    if label == result.winner:
        return "best"
    if result.tied and label in (result.best, *result.tied):
        return "tied"
    return ""


def summary_line(result: ExperimentResult) -> str:
    """"tied: a, b (within their spread) · 2 of 4 points disturbed (a, c): their times are not comparable"."""
    disturbed = [p.label for p in result.points if p.disturbed]
    parts = [result.verdict() or "best: none measured"]
    if disturbed:
        parts.append(f"{len(disturbed)} of {len(result.points)} point{'s' if len(result.points) != 1 else ''} "
                     f"disturbed ({', '.join(disturbed)}): other programs took a share of a device's core during "
                     "their runs, so their times are not comparable")
    return " · ".join(parts)
