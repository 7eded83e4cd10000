"""One rank's trace file read into its figures and what the job's figures need of it (``RankReading``): read,
filtered and measured in one go, so that only the figures and a few numbers per NCCL kernel and per busy
interval outlive the file's events (a worker process hands this back)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.traces import figures
from engine.traces.collectives import CommKernel
from engine.traces.errors import TraceError
from engine.traces.files import RankIdentity, identify
from engine.traces.json_stream import TraceStream
from engine.traces.kernels import COMMUNICATION, Interval
from engine.traces.lanes import LaneRequest, RankLanes, rank_lanes
from engine.traces.records import RankRecords
from engine.traces.results import Collective, CpuOp, RankFigures
from engine.traces.timeline import KINDS, Timeline, build

TOP_CPU_OPS = 8


@dataclass(frozen=True)
class IterationRange:
    """ProfilerStep numbers from ``first`` to ``last``, both included; None: open on that side."""
    first: int | None = None
    last: int | None = None

    def __contains__(self, iteration: int) -> bool:
        return iteration >= 0 and (self.first is None or iteration >= self.first) and \
            (self.last is None or iteration <= self.last)

    def text(self) -> str:
        return f"{'' if self.first is None else self.first}:{'' if self.last is None else self.last}"


@dataclass
class RankReading:
    identity: RankIdentity
    figures: RankFigures
    iterations: dict[int, figures.Temporal] = field(default_factory=dict)
    busy: dict[int, list[Interval]] = field(default_factory=dict)    # each iteration's merged busy intervals
    comm_kernels: list[CommKernel] = field(default_factory=list)
    world_size: int | None = None
    lanes: RankLanes | None = None     # where asked (LaneRequest): the timeline's intervals of its last iterations


def read_rank(path: Path, position: int, chosen: IterationRange | None = None,
              consecutive_kernel_delay: float = figures.CONSECUTIVE_KERNEL_DELAY,
              lanes: LaneRequest | None = None) -> RankReading:
    stream = TraceStream(path)
    records = RankRecords(str(path))
    add = records.add
    for event in stream.events():
        add(event)
    if not stream.had_events_key:
        raise TraceError(f"{path}: not a trace (a JSON object without traceEvents)")
    identity = identify(Path(path), stream.fields, position)
    timeline = build(records)
    by_iteration = {i: kept for i, kept in timeline.by_iteration().items() if chosen is None or i in chosen}
    positions = list(range(len(timeline))) if chosen is None else sorted(i for kept in by_iteration.values()
                                                                         for i in kept)
    reading = RankReading(identity, _rank_figures(records, figures.Selection(timeline, positions), identity,
                                                  consecutive_kernel_delay), world_size=identity.world_size)
    for iteration in sorted(i for i in by_iteration if i >= 0):
        inside = figures.Selection(timeline, by_iteration[iteration])
        reading.iterations[iteration] = figures.temporal(inside)
        reading.busy[iteration] = inside.merged()
    if lanes is not None:
        reading.lanes = rank_lanes(identity.rank, timeline, by_iteration, consecutive_kernel_delay, lanes, positions)
    communication = KINDS.index(COMMUNICATION)
    for i in positions:
        if timeline.kind[i] == communication:
            reading.comm_kernels.append(CommKernel(timeline.iteration[i], timeline.stream[i],
                                                   _short(records.names[records.name[timeline.source[i]]]),
                                                   timeline.ts[i], timeline.end[i]))
    return reading


def _rank_figures(records: RankRecords, selection: figures.Selection, identity: RankIdentity,
                  delay: float) -> RankFigures:
    timeline, positions = selection.timeline, selection.positions
    temporal = figures.temporal(selection)
    by_stream = figures.idle_by_stream_category(selection, delay)
    top = figures.top_idle_category(by_stream)
    kinds = figures.kernel_type_us(selection)
    kinds_total = sum(kinds.values())
    ops = sorted(records.cpu_ops.items(), key=lambda item: -item[1][1])
    return RankFigures(
        rank=identity.rank, file=records.path, rank_from=identity.source,
        kernel_us=temporal.span_us, idle_us=temporal.idle_us, compute_us=temporal.compute_us,
        non_compute_us=temporal.non_compute_us, idle_pct=temporal.pct(temporal.idle_us),
        compute_pct=temporal.pct(temporal.compute_us), non_compute_pct=temporal.pct(temporal.non_compute_us),
        comm_comp_overlap_pct=figures.comm_comp_overlap_pct(selection),
        idle_by_stream_category_us=by_stream,
        top_idle_category=top[0] if top else None, top_idle_category_pct=100 * top[1] if top else 0.0,
        kernel_type_us=kinds,
        kernel_type_pct={k: 100 * v / kinds_total for k, v in kinds.items()} if kinds_total > 0 else {},
        gpu_events=len(positions), gpu_events_read=len(records.ts),
        streams=sorted({timeline.stream[i] for i in positions}),
        cpu_ops=sum(int(count) for count, _ in records.cpu_ops.values()),
        top_cpu_ops=[CpuOp(name, int(count), total) for name, (count, total) in ops[:TOP_CPU_OPS]],
        launches=len(records.launch_ts),
        profiler_steps=sorted({n for n, _, _ in records.steps}), left_out_step=timeline.left_out_step,
        collectives=_collectives(records, timeline, positions))


def _collectives(records: RankRecords, timeline: Timeline, positions: list[int]) -> list[Collective]:
    communication = KINDS.index(COMMUNICATION)
    found: dict[tuple[str, str | None], dict] = {}
    for i in positions:
        if timeline.kind[i] != communication:
            continue
        source = timeline.source[i]
        meta = records.collective(source) or {}
        key = (_short(records.names[records.name[source]]), meta.get("Collective name"))
        entry = found.setdefault(key, {"calls": 0, "us": 0.0})
        entry["calls"] += 1
        entry["us"] += timeline.end[i] - timeline.ts[i]
        if meta:
            entry["meta"] = meta
    out = []
    for (kernel, name), entry in sorted(found.items(), key=lambda item: -item[1]["us"]):
        meta = entry.get("meta", {})
        sizes = [v for v in (meta.get("In msg nelems"), meta.get("Out msg nelems")) if isinstance(v, int)]
        group = meta.get("Group size")
        out.append(Collective(kernel, name if isinstance(name, str) else None, entry["calls"], entry["us"],
                              max(sizes) if sizes else None, meta.get("dtype") if isinstance(meta.get("dtype"), str)
                              else None, group if isinstance(group, int) else None))
    return out


def _short(kernel: str) -> str:
    """A kernel's name without its argument list: "ncclKernel_AllReduce_RING_LL_Sum_float"."""
    cut = kernel.find("(")
    return kernel[:cut] if cut > 0 else kernel
