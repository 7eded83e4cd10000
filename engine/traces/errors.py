"""The one exception the trace reader raises for input it cannot read."""
from __future__ import annotations


class TraceError(ValueError):
    """A trace that cannot be read, in one line that names the file and what is wrong with it (not a trace, a
    truncated gzip, a rank given twice, ranks of different world sizes). The CLI prints it as ``error: ...`` and
    exits 2; a trace with no GPU kernels is no error (its CPU ops are read, and a note says so)."""
