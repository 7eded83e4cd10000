"""Numbers as the figures show them: which values can be drawn, time units, shares, three digits."""
from __future__ import annotations

import math
from collections.abc import Iterable


def is_number(value) -> bool:
    """A value that can be drawn: a real, finite number (None, NaN, inf and bools are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def pct(value) -> str:
    return f"{value:.1%}" if is_number(value) else "n/a"


def time_unit(values: Iterable) -> tuple[str, float]:
    """Milliseconds when every value is under a second: "7.1 ms" reads better than "0.0071 s"."""
    finite = [abs(v) for v in values if is_number(v)]
    return ("ms", 1000.0) if finite and max(finite) < 1 else ("s", 1.0)


def scaled(values: Iterable, factor: float) -> list:
    return [v * factor if is_number(v) else None for v in values]


def format_value(value) -> str:
    """A value printed on a chart or in a report: three significant digits, thousands in full."""
    if not is_number(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def table_value(value):
    """A value in a table file (CSV): a float to six significant digits and at least a thousandth of its unit
    (a microsecond of a millisecond, a thousandth of a point or a MiB; a loss of 1.00042 or 0.000123457),
    trailing zeros dropped; whole numbers and text as they are; None and what cannot be drawn empty."""
    if value is None or isinstance(value, bool) or not isinstance(value, float):
        return "" if value is None else value
    if not math.isfinite(value):
        return ""
    if value == 0:
        return "0"
    if abs(value) < 1:
        return f"{value:.6g}"
    text = f"{value:.{max(3, 6 - len(str(int(abs(value)))))}f}"
    return text.rstrip("0").rstrip(".")
