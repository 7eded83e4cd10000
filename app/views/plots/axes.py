"""The plots' own axes: time counted back from now (the live telemetry), whole numbers (steps)."""
from __future__ import annotations

import math

import pyqtgraph as pg


class RelativeTimeAxis(pg.AxisItem):
    """Time axis labelled relative to ``now`` (live: "-30" is 30 s ago), at round relative values."""

    def __init__(self):
        super().__init__("bottom")
        self.now: float | None = None
        self.enableAutoSIPrefix(False)  # an hour is 3600 s, not "3.6 ks"

    def tickValues(self, minVal, maxVal, size):  # noqa: N802  (Qt naming)
        if self.now is None:
            return super().tickValues(minVal, maxVal, size)
        levels = super().tickValues(minVal - self.now, maxVal - self.now, size)
        return [(spacing, [v + self.now for v in values]) for spacing, values in levels]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        if self.now is None:
            return super().tickStrings(values, scale, spacing)
        return super().tickStrings([v - self.now for v in values], scale, spacing)


class WholeNumberAxis(pg.AxisItem):
    """An axis of counts (steps): ticks at whole numbers only. A 5-step run's axis spans 0-4, where
    pyqtgraph's own ticks fall every half step and label steps that do not exist ("2.5")."""

    def __init__(self, orientation: str = "bottom"):
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)  # step 20,000, not "20 k"

    def tickValues(self, minVal, maxVal, size):  # noqa: N802  (Qt naming)
        levels = [(spacing, [v for v in values if float(v).is_integer()])
                  for spacing, values in super().tickValues(minVal, maxVal, size) if spacing >= 1]
        levels = [(spacing, values) for spacing, values in levels if values]
        if not levels:  # pyqtgraph ticks a narrow range (a few steps) only in fractions: each step in it
            levels = [(1.0, [float(v) for v in range(math.ceil(minVal), math.floor(maxVal) + 1)])]
        return levels

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        return [f"{int(round(v * scale)):d}" for v in values]
