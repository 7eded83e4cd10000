"""A job's traces as a run of kind trace: what the store keeps of it, so that the history lists it beside the runs
and watched scripts, the app shows it as one (each rank a device), and the exports write it as one.

- **The run**: strategy "trace" (``TRACE``; no registered strategy: nothing runs it), each rank a device named
  "rank N", each ProfilerStep#N a step N (its time the job's span of that iteration, each rank's busy share of
  it); its config (the store's is an ExperimentConfig) the defaults but for the strategy, its model (the traces'
  name, "traces: NAME", as a watched script's is its file's), its devices ("N ranks"), the steps and no warm-up;
  the traces' paths in the summary's ``traces`` (``TraceSource``) and its first note.
- **The summary**: each rank's busy share of its GPU span (``devices_busy``; the bubble measured: their mean idle
  share), its time by kind per iteration (``time_by_kind``, from HTA's kernel types), the job's findings.
- **Its timeline**: the lanes of the last iterations (engine/traces/lanes.py), on a clock from the job's first
  kernel: the ranks' clocks as the traces recorded them.
- **Its telemetry**: each rank's busy share in columns over its span, as utilization samples (percent): the
  cluster view's heatmap for many ranks.

The figures, not the traces: a trace is read again from its paths, where they still are.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from engine.config import ExperimentConfig
from engine.results import Bubble, DeviceKinds, MeanStd, RunSummary, Step
from engine.results.read_facts import TraceSource
from engine.traces.kernels import COMMUNICATION, COMPUTATION, MEMORY
from engine.traces.lanes import MOST_INTERVALS, RankLanes
from engine.traces.results import RankFigures, TraceJob

TRACE = "trace"      # the strategy a run of kind trace is stored under
NO_THEORY = ("no theoretical bubble: a run read from profiler traces; its bubble is the ranks' mean GPU idle "
             "share of their spans (HTA's idle time)")
US = 1e-6


def device(rank: int) -> str:
    return f"rank {rank}"


def is_trace_run(strategy: str | None) -> bool:
    """A stored run read from profiler traces (its config's or summary's strategy), not one that ran."""
    return strategy == TRACE


@dataclass(frozen=True)
class TraceRun:
    """What the store keeps of a job's traces: the run's config, its steps (with the lanes' intervals) and
    telemetry samples, and its summary (``run_id`` set once stored)."""
    config: dict
    summary: RunSummary
    steps: list[Step] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)


def trace_run(job: TraceJob, lanes: list[RankLanes], paths: list[str | Path], of_run: str | None = None) -> TraceRun:
    """``of_run``: the id of the run whose stored traces these are (``trace --run ID --store``): named for it, not
    for the files they were written to for reading."""
    given = [f"run {of_run}'s profiler traces"] if of_run else [os.path.abspath(p) for p in paths]
    origin = _origin(lanes)
    steps = _steps(job, lanes, origin)
    times = [s.time_s for s in steps if s.time_s]
    gpu_ranks = [r for r in job.ranks if r.kernel_us > 0]
    busy = [1 - r.idle_pct / 100 if r.kernel_us > 0 else 0.0 for r in job.ranks]
    resolution = max((rank.resolution_us for rank in lanes), default=0.0)
    source = TraceSource(given, _files(job), [r.rank for r in job.ranks], job.world_size, job.iterations_chosen,
                         job.consecutive_kernel_delay, resolution)
    notes = [f"read from profiler traces: {', '.join(given)}", NO_THEORY, *job.notes]
    if resolution > 0:
        notes.append(f"the timeline's lanes join gaps under {resolution:.0f} µs (at most {MOST_INTERVALS:,} "
                     "intervals a rank); the figures take every kernel")
    summary = RunSummary(
        status="finished", strategy=TRACE, model=f"traces: {_name(given)}", devices=[device(r.rank) for r in job.ranks],
        steps=len(steps), steps_measured=len(steps),
        step_time_s=MeanStd(statistics.fmean(times), statistics.pstdev(times)) if times else None,
        devices_busy=busy,
        bubble=Bubble(measured=1 - statistics.fmean(b for r, b in zip(job.ranks, busy, strict=True) if r.kernel_us > 0)
                      if gpu_ranks else None),
        notes=notes, timeline_steps=sum(1 for s in steps if s.intervals),
        time_by_kind=[_kinds(r, job) for r in job.ranks] if gpu_ranks else None,
        diagnosis=job.findings[0].text if job.findings else None, findings=list(job.findings), traces=source)
    # What tells it apart in the history and `runs`: what it "trains" (model_label: the config's model, as a watched
    # script's is its file) is the traces' name, its devices the ranks read.
    config = ExperimentConfig(strategy=TRACE, model=summary.model, devices=f"{len(job.ranks)} ranks",
                              steps=max(1, len(steps)), warmup=0).to_dict()
    return TraceRun(config, summary, steps, _samples(lanes, origin))


def store_trace_run(store, run: TraceRun) -> str:
    """Store ``run`` (a Store or RemoteStore) as a finished run; its id."""
    run_id = store.create_run(run.config)
    store.add_steps(run_id, run.steps)
    store.add_samples(run_id, run.samples)
    store.finish_run(run_id, "finished", dataclasses.replace(run.summary, run_id=run_id))
    return run_id


def _origin(lanes: list[RankLanes]) -> float:
    """The job's clock's zero: its first kernel among what the lanes keep (µs)."""
    starts = [start for rank in lanes for start, _ in rank.bounds.values()]
    starts += [rank.intervals[0][2] for rank in lanes if rank.intervals]
    starts += [rank.busy[0][0] for rank in lanes if rank.busy]
    return min(starts, default=0.0)


def _steps(job: TraceJob, lanes: list[RankLanes], origin: float) -> list[Step]:
    """A step per iteration (or one, 0, for traces without ProfilerSteps), the lanes' intervals on those shown."""
    intervals: dict[int, dict[str, list[list]]] = {}
    for rank in lanes:
        for iteration, kind, start, end in rank.intervals:
            step = max(iteration, 0)
            intervals.setdefault(step, {}).setdefault(device(rank.rank), []).append(
                [kind, (start - origin) * US, (end - origin) * US])
    if not job.iterations:
        spans = [row[1:] for by_device in intervals.values() for rows in by_device.values() for row in rows]
        if not spans:
            return []
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        busy = {device(r.rank): 1 - r.idle_pct / 100 for r in job.ranks if r.kernel_us > 0}
        return [Step(0, t=end, time_s=end - start, busy=busy, intervals=intervals.get(0))]
    steps = []
    for it in job.iterations:
        ends = [rank.bounds[it.iteration][1] for rank in lanes if it.iteration in rank.bounds]
        steps.append(Step(it.iteration, t=(max(ends) - origin) * US if ends else None, time_s=it.span_us * US,
                          busy={device(r.rank): 1 - r.idle_pct / 100 for r in it.ranks if r.kernel_us > 0},
                          intervals=intervals.get(it.iteration)))
    return steps


def _kinds(rank: RankFigures, job: TraceJob) -> DeviceKinds:
    """The rank's mean iteration by kind, each moment once (compute first, as engine/record/time_by_kind.py's
    precedence puts the device's own work first): HTA's kernel types and their overlaps, over its GPU span, scaled
    to its mean iteration; ``idle_s`` its idle time, so that the kinds and idle add up to its step."""
    own = [r.kernel_us for it in job.iterations for r in it.ranks if r.rank == rank.rank and r.kernel_us > 0]
    step_us = statistics.fmean(own) if own else rank.kernel_us
    if rank.kernel_us <= 0:
        return DeviceKinds(device(rank.rank), 0.0)
    scale = step_us / rank.kernel_us * US
    types = rank.kernel_type_us
    held = {"compute": sum(us for kind, us in types.items() if COMPUTATION in kind),
            "communication": sum(us for kind, us in types.items() if COMMUNICATION in kind
                                 and COMPUTATION not in kind),
            "memory": types.get(MEMORY, 0.0),
            "sync": max(0.0, rank.kernel_us - rank.idle_us - sum(types.values()))}
    hidden = {"communication": sum(us for kind, us in types.items() if COMMUNICATION in kind and COMPUTATION in kind),
              "memory": sum(us for kind, us in types.items() if MEMORY in kind and kind != MEMORY)}
    return DeviceKinds(device(rank.rank), step_us * US, {k: us * scale for k, us in held.items() if us > 0},
                       rank.idle_us * scale, {k: us * scale for k, us in hidden.items() if us > 0})


def _samples(lanes: list[RankLanes], origin: float) -> list[dict]:
    """Each rank's busy columns as utilization samples (percent), on the job's clock."""
    return [{"t": (middle - origin) * US, "device": device(rank.rank), "util": 100 * share}
            for rank in lanes for middle, share in rank.busy]


def _files(job: TraceJob) -> int:
    return len({r.file for r in job.ranks})


def _name(paths: list[str]) -> str:
    """What the history's model column calls the traces: the folder's or file's name, and how many more."""
    first = Path(paths[0]).name if paths else "?"
    return first + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
