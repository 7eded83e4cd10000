"""Reading PyTorch profiler (Kineto / Chrome-trace) traces of a job, one file per rank: every GPU's busy and idle
time by kind, its idle time by cause, and across ranks the waits at collectives and the straggler
(docs/traces.md). Its own room: no Qt, no torch; the standard library reads a 1 GB trace in bounded memory.

    json_stream  a file's events one at a time (gzip or plain)
    records      a rank's events kept compact while read
    files        which files, which rank each is
    timeline     HTA's default filter, times, launches and iterations
    kernels      kernel types and interval arithmetic
    figures      a rank's figures (HTA's definitions)
    collectives  across ranks: collectives matched, waits, straggler, the job's idle time
    rank, job    one file read; the job put together
    findings     what the figures say
    lanes        where asked: a rank's last iterations' kernels by kind and idle gaps by cause, its busy columns
    as_run       a job's traces as a run of kind trace, for the store (``trace --store``, the app's Open traces…)
    command      ``main.py trace``
"""
from engine.traces.errors import TraceError
from engine.traces.job import read_job
from engine.traces.results import TraceJob

__all__ = ["TraceError", "TraceJob", "read_job"]
