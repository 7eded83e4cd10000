"""Labels at x positions that never print over each other: each takes the first free row, or none.

A run's start and end markers ("run 182154", "end"), an experiment's many short
runs, a sweep's "best" beside its "automatic split": labels of nearby lines. Each
label reaches ``width`` to the right of its x (the text starts at its line);
going left to right, a label takes the lowest row whose last label ends before it
starts (with ``gap`` between them), and is left out (None) when ``rows`` are all
taken there: its line stays, and the plot's hover names it.
"""
from __future__ import annotations

from collections.abc import Sequence


def label_rows(xs: Sequence[float], widths: Sequence[float], rows: int = 3, gap: float = 0.0) -> list[int | None]:
    """The row (0 = the first) of each label, in the order given; None for a label left out."""
    ends = [float("-inf")] * rows
    out: list[int | None] = [None] * len(xs)
    for i in sorted(range(len(xs)), key=lambda k: xs[k]):
        row = next((r for r in range(rows) if ends[r] + gap <= xs[i]), None)
        if row is not None:
            ends[row] = xs[i] + widths[i]
        out[i] = row
    return out
