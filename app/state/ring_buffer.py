"""Preallocated numpy ring buffers for live plots (no Qt, no torch).

Each value is written twice, at ``i`` and ``i + capacity``, so the newest
``n`` values are always one contiguous slice of the backing array: the plots
get a zero-copy view on every redraw instead of a concatenated copy.
"""
from __future__ import annotations

import numpy as np


class RingBuffer:
    """The last ``capacity`` rows of ``columns`` float64 columns."""

    def __init__(self, capacity: int, columns: int = 2):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        self.columns = int(columns)
        self._data = np.zeros((self.columns, 2 * self.capacity), dtype=np.float64)
        self._next = 0          # where the next row goes, in [0, capacity)
        self._count = 0         # rows held, at most capacity
        self.version = 0        # bumps on every change: redraw only what changed

    def __len__(self) -> int:
        return self._count

    def append(self, *values: float) -> None:
        i = self._next
        for c, value in enumerate(values):
            self._data[c, i] = value
            self._data[c, i + self.capacity] = value
        self._next = (i + 1) % self.capacity
        self._count = min(self._count + 1, self.capacity)
        self.version += 1

    def extend(self, rows: np.ndarray) -> None:
        """Append many rows at once; ``rows`` has shape (n, columns)."""
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != self.columns:
            raise ValueError(f"rows must have shape (n, {self.columns}), got {rows.shape}")
        if len(rows) > self.capacity:
            rows = rows[-self.capacity:]
        n = len(rows)
        if n == 0:
            return
        idx = (self._next + np.arange(n)) % self.capacity
        self._data[:, idx] = rows.T
        self._data[:, idx + self.capacity] = rows.T
        self._next = int((self._next + n) % self.capacity)
        self._count = min(self._count + n, self.capacity)
        self.version += 1

    def clear(self) -> None:
        self._next = 0
        self._count = 0
        self.version += 1

    def column(self, c: int) -> np.ndarray:
        """The held values of column ``c``, oldest first: a view, not a copy."""
        start = self._next + self.capacity - self._count
        return self._data[c, start:start + self._count]

    def last(self, c: int) -> float | None:
        if not self._count:
            return None
        return float(self._data[c, self._next + self.capacity - 1])


class ThinningBuffer:
    """A whole run's (x, y) series in at most ``capacity`` points: when full, every other point goes and
    from then on only every 2nd (4th, ...) point comes in. Memory stays bounded however long the run,
    and the curve still spans it from its first step (a ring would drop the start of a loss curve).
    The same reading interface as RingBuffer's."""

    def __init__(self, capacity: int = 8192):
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity}")
        self.capacity = int(capacity)
        self._data = np.zeros((2, self.capacity), dtype=np.float64)
        self._count = 0
        self._offered = 0       # points offered so far: one in ``stride`` is kept
        self.stride = 1
        self.version = 0

    def __len__(self) -> int:
        return self._count

    def append(self, x: float, y: float) -> None:
        keep = self._offered % self.stride == 0
        self._offered += 1
        if not keep:
            return
        if self._count == self.capacity:
            kept = self._data[:, 0:self._count:2]
            self._count = kept.shape[1]
            self._data[:, :self._count] = kept.copy()
            self.stride *= 2
            if (self._offered - 1) % self.stride:
                return  # this point is no longer on the coarser grid
        self._data[0, self._count] = x
        self._data[1, self._count] = y
        self._count += 1
        self.version += 1

    def clear(self) -> None:
        self._count = self._offered = 0
        self.stride = 1
        self.version += 1

    def column(self, c: int) -> np.ndarray:
        return self._data[c, :self._count]

    def last(self, c: int) -> float | None:
        return float(self._data[c, self._count - 1]) if self._count else None
