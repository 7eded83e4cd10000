"""visible_peaks (app/views/plots/peak_curve.py): what a live telemetry curve hands pyqtgraph to draw."""
from __future__ import annotations

import numpy as np
import pytest

from app.views.plots.peak_curve import visible_peaks

pytestmark = pytest.mark.quick


def test_an_hour_in_view_keeps_each_columns_lowest_and_highest():
    x = np.arange(36_000) / 10.0                    # an hour at 10 Hz
    y = np.sin(x) * 50 + 50
    y[12_345] = 100.0 + 7                           # one spike, and one dip, in the middle of columns
    y[30_001] = -3.0
    px, py = visible_peaks(x, y, 0.0, 3600.0, 400)
    assert len(px) == len(py) <= 2 * 400 and len(px) < len(x) / 40
    assert py.max() == 107.0 and py.min() == -3.0    # peaks survive: a spike is never averaged away
    assert np.all(np.diff(px) >= 0)                  # x ascending, as pyqtgraph clips by bisecting it
    # Each column's pair is that column's lowest and highest sample.
    edges = np.linspace(0.0, 3600.0, 401)
    column = np.searchsorted(edges, 1000.0, "right") - 1
    inside = (x >= edges[column]) & (x < edges[column + 1])
    at = np.flatnonzero(px == x[inside][0])
    assert sorted(py[at]) == [y[inside].min(), y[inside].max()]


def test_only_the_window_and_one_sample_each_side_are_kept():
    x = np.arange(36_000) / 10.0
    y = x.copy()
    px, py = visible_peaks(x, y, 3480.0, 3600.0, 800)   # the last two minutes: fewer samples than 2 a column
    assert px[0] == pytest.approx(3479.9) and px[-1] == pytest.approx(3599.9)
    assert len(px) == 1201 and np.array_equal(px, py)


def test_a_gap_wider_than_a_column_stays_a_break():
    x = np.concatenate([np.arange(0, 1000, 0.1), [1500.0], np.arange(2000, 3600, 0.1)])
    y = np.ones_like(x)
    y[10_000] = np.nan                               # the break put in the gap's middle (engine/figures/gaps.py)
    px, py = visible_peaks(x, y, 0.0, 3600.0, 400)
    assert np.isnan(py).sum() == 2 and px[np.isnan(py)][0] == 1500.0
    assert np.all(py[~np.isnan(py)] == 1.0)


def test_nothing_to_draw_and_a_view_not_laid_out_yet():
    empty = np.empty(0)
    assert [len(a) for a in visible_peaks(empty, empty, 0.0, 1.0, 400)] == [0, 0]
    x = np.arange(5000) / 10.0
    px, _ = visible_peaks(x, x, 0.0, 500.0, 0)         # no pixels yet: clipped, not reduced
    assert len(px) == 5000
