"""A job's traces read: every rank's file (one after another, or in worker processes), checked as one job, and
the figures across ranks (the iterations, the waits at collectives, the straggler) put together."""
from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from engine.traces import collectives, figures
from engine.traces.errors import TraceError
from engine.traces.files import FROM_DISTRIBUTED_INFO, check_job, trace_files
from engine.traces.findings import job_findings
from engine.traces.lanes import LaneRequest, RankLanes
from engine.traces.rank_reading import IterationRange, RankReading, read_rank
from engine.traces.results import IterationFigures, RankIteration, Straggler, TraceJob

# Worker processes pay their start (a fresh interpreter importing this package: about 0.1 s) back only on work
# of some size: below this many bytes of trace files, one process reads them all.
PARALLEL_FROM_BYTES = 64 << 20
ALL_LANES = LaneRequest()   # the lanes a reading keeps unless told otherwise (frozen: one default serves all)


def parse_iterations(text: str | None) -> IterationRange | None:
    """"A:B" (both included; either side may be left open), or "N" alone."""
    if text is None:
        return None
    first, colon, last = text.partition(":")
    try:
        low = int(first) if first.strip() else None
        high = (int(last) if last.strip() else None) if colon else low
    except ValueError:
        raise TraceError(f"--iterations {text}: not A:B (ProfilerStep numbers, e.g. 5:9 or 5:)") from None
    if low is not None and high is not None and low > high:
        raise TraceError(f"--iterations {text}: {low} is after {high}")
    return IterationRange(low, high)


# Told as each rank's file is read: (files read, files in all, the file just read).
Progress = Callable[[int, int, Path], None]


def read_job(paths: list[str | Path], iterations: str | None = None,
             consecutive_kernel_delay: float = figures.CONSECUTIVE_KERNEL_DELAY,
             workers: int | None = None) -> TraceJob:
    """The job whose traces ``paths`` name (files or folders). ``iterations``: "A:B" to keep to ProfilerStep#A to
    #B; ``workers``: processes reading files side by side (default: one per core, where the files are big)."""
    return read_job_and_lanes(paths, iterations, consecutive_kernel_delay, workers, lanes=None)[0]


def read_job_and_lanes(paths: list[str | Path], iterations: str | None = None,
                       consecutive_kernel_delay: float = figures.CONSECUTIVE_KERNEL_DELAY,
                       workers: int | None = None, lanes: LaneRequest | None = ALL_LANES,
                       progress: Progress | None = None) -> tuple[TraceJob, list[RankLanes]]:
    """``read_job``, and each rank's lanes for the timeline as ``lanes`` asks (engine/traces/lanes.py; None:
    none), in rank order; ``progress`` is told as each file is read."""
    chosen = parse_iterations(iterations)
    files = trace_files(paths)
    readings = _read_all(files, chosen, consecutive_kernel_delay, workers, lanes, progress)
    world = check_job([(Path(r.figures.file), r.identity) for r in readings])
    readings.sort(key=lambda r: r.identity.rank)
    if chosen is not None and not any(r.iterations for r in readings):
        found = sorted({n for r in readings for n in r.figures.profiler_steps})
        held = f"#{found[0]} to #{found[-1]}" if found else "no ProfilerStep"
        raise TraceError(f"--iterations {chosen.text()}: no iteration with GPU kernels in that range; the traces "
                         f"hold {held}")
    waits = collectives.match_waits({r.identity.rank: r.comm_kernels for r in readings})
    ranks = [_with_wait(r, waits) for r in readings]
    job_types: dict[str, float] = {}
    for rank in ranks:
        for kind, us in rank.kernel_type_us.items():
            job_types[kind] = job_types.get(kind, 0.0) + us
    total = sum(job_types.values())
    by_iteration = _iterations(readings, waits)
    job = TraceJob(ranks=ranks, kernel_type_pct={k: 100 * v / total for k, v in job_types.items()} if total else {},
                   iterations=by_iteration, straggler=_straggler(readings, waits, by_iteration), world_size=world,
                   missing_ranks=max(0, world - len(ranks)) if world else 0,
                   iterations_chosen=chosen.text() if chosen else None,
                   consecutive_kernel_delay=consecutive_kernel_delay, collectives_matched=waits.matched,
                   notes=_notes(readings, world))
    return (dataclasses.replace(job, findings=job_findings(job)),
            [r.lanes for r in readings if r.lanes is not None])


def _read_all(files: list[Path], chosen, delay: float, workers: int | None, lanes: LaneRequest | None,
              progress: Progress | None) -> list[RankReading]:
    if workers is None:
        size = sum(f.stat().st_size for f in files)
        workers = min(len(files), len(os.sched_getaffinity(0))) if size >= PARALLEL_FROM_BYTES else 1
    if workers <= 1 or len(files) <= 1:
        return _told(progress, files, (read_rank(f, i, chosen, delay, lanes) for i, f in enumerate(files)))
    import multiprocessing
    # spawn, not fork: the caller may be the app, whose threads a fork would copy mid-flight
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        n = len(files)
        return _told(progress, files, pool.map(read_rank, files, range(n), [chosen] * n, [delay] * n, [lanes] * n))


def _told(progress: Progress | None, files: list[Path], readings) -> list[RankReading]:
    """``readings`` (in the files' order, as each comes), with ``progress`` told of each."""
    out = []
    for reading in readings:
        out.append(reading)
        if progress is not None:
            progress(len(out), len(files), files[len(out) - 1])
    return out


def _with_wait(reading: RankReading, waits: collectives.Waits):
    return dataclasses.replace(reading.figures, wait_at_collectives_us=waits.rank_wait(reading.identity.rank))


def _iterations(readings: list[RankReading], waits: collectives.Waits) -> list[IterationFigures]:
    out = []
    for iteration in sorted({i for r in readings for i in r.iterations}):
        present = [r for r in readings if iteration in r.iterations]
        rows = []
        for r in present:
            t = r.iterations[iteration]
            rows.append(RankIteration(r.identity.rank, t.span_us, t.pct(t.idle_us), t.pct(t.compute_us),
                                      t.pct(t.non_compute_us), waits.rank_wait(r.identity.rank, iteration)))
        idle = collectives.job_idle([r.busy[iteration] for r in present])
        straggler = collectives.straggler_of(waits.set_by.get(iteration, {}))
        out.append(IterationFigures(iteration, rows, 100 * idle[1] / idle[0] if idle and idle[0] > 0 else None,
                                    idle[0] if idle else 0.0, straggler[0] if straggler else None,
                                    straggler[1] if straggler else 0.0))
    return out


def _straggler(readings: list[RankReading], waits: collectives.Waits,
               iterations: list[IterationFigures]) -> Straggler | None:
    total: dict[int, float] = {}
    for by_rank in waits.set_by.values():
        for rank, us in by_rank.items():
            total[rank] = total.get(rank, 0.0) + us
    found = collectives.straggler_of(total)
    if found is None:
        return None
    rank, wait_set = found
    all_wait = sum(total.values())
    led = [it.iteration for it in iterations if it.straggler == rank]
    over = set(led) or {it.iteration for it in iterations}
    computes = {r.identity.rank: sum(t.compute_us for i, t in r.iterations.items() if i in over) for r in readings}
    own, median = computes.get(rank, 0.0), statistics.median(computes.values()) if computes else 0.0
    why = ("it computes longer than the ranks' median" if median > 0 and own > 1.05 * median else
           "not its GPU compute (no longer than the ranks' median): its CPU launched late, or its input came late")
    text = (f"rank {rank} arrived last at the collectives that set {100 * wait_set / all_wait:.0f} % of the ranks' "
            f"wait at collectives ({wait_set / 1e3:.1f} ms, straggler in {len(led)} of {len(iterations)} "
            f"iterations); its compute {own / 1e3:.1f} ms against the ranks' median {median / 1e3:.1f} ms: {why}")
    return Straggler(rank, led, wait_set, 100 * wait_set / all_wait, own, median, text)


def _notes(readings: list[RankReading], world: int | None) -> list[str]:
    notes = []
    sources = {r.identity.source for r in readings}
    if sources != {FROM_DISTRIBUTED_INFO}:
        said = ", ".join(f"rank {r.identity.rank} from its {r.identity.source}" for r in readings
                         if r.identity.source != FROM_DISTRIBUTED_INFO)
        notes.append(f"ranks without distributedInfo: {said}")
    if world and len(readings) < world:
        read = ", ".join(str(r.identity.rank) for r in readings[:16]) + (", ..." if len(readings) > 16 else "")
        notes.append(f"{len(readings)} of the job's {world} ranks read ({read}); the other {world - len(readings)} "
                     "are not in these traces: figures across ranks are of the ranks read")
    left_out = sorted({r.figures.left_out_step for r in readings
                       if r.figures.left_out_step is not None and r.figures.gpu_events_read})
    if left_out:
        notes.append("left out, as HTA's default does: the kernels of each rank's last ProfilerStep (#"
                     + ", #".join(map(str, left_out)) + ", cut off where the profiler stopped) and kernels no CPU "
                     "op launched")
    for r in readings:
        if r.figures.gpu_events_read == 0:
            ops = ", ".join(op.name for op in r.figures.top_cpu_ops[:3])
            notes.append(f"rank {r.identity.rank}: no GPU kernels: CPU ops only ({r.figures.cpu_ops} ops"
                         + (f"; the longest: {ops})" if ops else ")"))
    return notes
