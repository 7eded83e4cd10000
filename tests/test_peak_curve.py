"""visible_peaks (app/views/plots/peak_curve.py): what a live telemetry curve hands pyqtgraph to draw."""
from __future__ import annotations

import numpy as np
import pytest

from app.state.ring_buffer import RingBuffer
from app.views.plots.peak_curve import unwrapped, visible_peaks
from app.views.plots.series_arrays import drawn

pytestmark = pytest.mark.quick


def test_an_hour_in_view_keeps_each_columns_lowest_and_highest():
    x = np.arange(36_000) / 10.0                    # an hour at 10 Hz
    y = np.sin(x) * 50 + 50
    y[12_345] = 100.0 + 7                           # one spike, and one dip, in the middle of columns
    y[30_001] = -3.0
    px, py, _ = visible_peaks(x, y, 0.0, 3600.0, 400)
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
    px, py, joined = visible_peaks(x, y, 3480.0, 3600.0, 800)   # the last two minutes: fewer samples than 2 a column
    assert px[0] == pytest.approx(3479.9) and px[-1] == pytest.approx(3599.9)
    assert len(px) == 1201 and np.array_equal(px, py) and joined.all()


def test_a_gap_wider_than_a_column_stays_a_break():
    x = np.concatenate([np.arange(0, 1000, 0.1), [1500.0], np.arange(2000, 3600, 0.1)])
    y = np.ones_like(x)
    y[10_000] = np.nan                               # the break put in the gap's middle (engine/figures/gaps.py)
    px, py, _ = visible_peaks(x, y, 0.0, 3600.0, 400)
    assert np.isnan(py).sum() == 2 and px[np.isnan(py)][0] == 1500.0
    assert np.all(py[~np.isnan(py)] == 1.0)


def test_nothing_to_draw_and_a_view_not_laid_out_yet():
    empty = np.empty(0)
    assert [len(a) for a in visible_peaks(empty, empty, 0.0, 1.0, 400)] == [0, 0, 0]
    x = np.arange(5000) / 10.0
    px, _, _ = visible_peaks(x, x, 0.0, 500.0, 0)         # no pixels yet: clipped, not reduced
    assert len(px) == 5000


def test_gaps_given_as_indices_break_the_line_without_a_nan_put_in():
    """An hour with a 500-s hole and a 0.05-s one: the hole wider than a column is one break in what is drawn,
    in the view and in an hour's columns; the one narrower than a column is no break at that scale."""
    x = np.concatenate([np.arange(0, 1000, 0.1), np.arange(1500, 3600, 0.1)])
    y = np.sin(x)
    gaps = np.array([9_999])                                 # from sample 9,999 (t 999.9) to 10,000 (t 1500)
    for x0, x1, columns in ((0.0, 3600.0, 400), (900.0, 1600.0, 4000)):   # reduced, then every sample
        px, py, joined = visible_peaks(x, y, x0, x1, columns, gaps)
        dx, dy, connect = drawn(px, py, joined)
        (cut,) = np.flatnonzero(~connect[:-1])
        assert dx[cut] <= x[9_999] and dx[cut + 1] == 1500.0, (x0, x1)
    # a break between two samples in one column of an hour's view: sub-pixel, drawn joined
    px, py, joined = visible_peaks(x, y, 0.0, 3600.0, 400, np.array([50]))
    assert joined.all()
    # a NaN sample still breaks, beside the gaps
    y_nan = y.copy()
    y_nan[15_000] = np.nan                                   # t 2000
    _, _, connect = drawn(*visible_peaks(x, y_nan, 1990.0, 2010.0, 4000, gaps))
    assert (~connect[:-1]).sum() == 1


def test_a_full_ring_buffers_view_written_over_since_is_drawn_as_it_was():
    """A PeakCurve keeps the buffer's views (no copy a frame); a pan before the next tick redraws from them after
    new samples wrapped onto their start: those are left out, x stays ascending, the gaps follow."""
    ring = RingBuffer(100)
    ring.extend(np.column_stack([np.arange(100.0), np.arange(100.0) * 2]))
    x, y = ring.column(0), ring.column(1)
    gaps = np.array([1, 50])
    assert unwrapped(x, y, gaps)[0] is x                      # as handed over: nothing to leave out
    for t in (100.0, 101.0, 102.0):
        ring.append(t, t * 2)
    ux, uy, ugaps = unwrapped(x, y, gaps)
    assert np.all(np.diff(ux) > 0) and ux[0] == 3.0 and ux[-1] == 99.0
    assert np.array_equal(uy, ux * 2) and list(ugaps) == [47]
