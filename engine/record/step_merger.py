"""Merging the ranks' reports of a step into the run's step: one ``Step`` once every rank reported it, with each
rank's wait at its collectives cut out of their communication (docs/summary.md)."""
from __future__ import annotations

from engine.measure.timing import BUSY_KINDS, busy_time
from engine.results import Step
from engine.wire.rank import StepReport


def separate_collective_waits(reports: list[StepReport]) -> None:
    """Cut each rank's time in a collective before its last peer arrived off as "wait" (in place).

    A collective cannot start until every rank has joined it, so a rank that
    launches it early is waiting, not communicating. Every rank runs a step's
    collectives in the same order (DDP requires it), so the k-th "communication"
    interval of each rank is the same collective; the worker sees all ranks on
    one clock, so the last arrival is known here and nowhere else. The wait is
    what is left of that time where the rank computes nothing else: ddp launches
    a bucket while its backward goes on, and successive buckets' waits overlap.
    """
    if len(reports) < 2:
        return
    per_rank = []
    for report in reports:
        spans = [(device, span) for device, device_spans in report.intervals.items()
                 for span in device_spans if span[0] == "communication"]
        per_rank.append(sorted(spans, key=lambda item: item[1][1]))
    if len({len(spans) for spans in per_rank}) != 1:
        return  # not the same collectives on every rank: leave them as timed
    waits: list[dict[str, list[tuple[float, float]]]] = [{} for _ in reports]
    for k in range(len(per_rank[0])):
        arrival = max(spans[k][1][1] for spans in per_rank)
        for r, spans in enumerate(per_rank):
            device, span = spans[k]
            if span[1] < arrival:
                waited_until = min(arrival, span[2])
                waits[r].setdefault(device, []).append((span[1], waited_until))
                span[1] = waited_until
    for report, by_device in zip(reports, waits, strict=True):
        for device, pieces in by_device.items():
            spans = report.intervals[device]
            other_work = [(t0, t1) for kind, t0, t1 in spans if kind in BUSY_KINDS]
            for t0, t1 in _minus(_union(pieces), other_work):
                spans.append(["wait", t0, t1])


def _union(pieces: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for t0, t1 in sorted(pieces):
        if merged and t0 <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], t1)
        else:
            merged.append([t0, t1])
    return [(a, b) for a, b in merged]


def _minus(pieces: list[tuple[float, float]], cuts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """What of ``pieces`` no interval of ``cuts`` covers."""
    out = []
    for t0, t1 in pieces:
        parts = [(t0, t1)]
        for c0, c1 in cuts:
            parts = [piece for a, b in parts for piece in ((a, min(b, c0)), (max(a, c1), b)) if piece[1] > piece[0]]
        out.extend(parts)
    return out


class StepMerger:
    """Collects each rank's report of a step; emits one merged step when all ranks have reported.

    A step's time runs from the previous step's last end to this step's last end,
    so consecutive steps tile the run even when ranks start their steps at
    different moments (a pipeline's later stage starts waiting early).
    """

    def __init__(self, world_size: int, device_names: list[str], origin: float, pair_collectives: bool = True,
                 loss_parts: bool = True):
        """``pair_collectives``: every collective takes every rank, so the k-th of each rank's is one
        (separate_collective_waits); off where they run in subgroups (fsdp+tp's 2-D mesh). ``loss_parts``: each
        rank reports its share of the step's loss (our ranks), summed; off, each reports the loss it saw (a
        watched script's: its own batch's mean, or a pipeline's last stage's), averaged."""
        self.pair_collectives = pair_collectives
        self.loss_parts = loss_parts
        self.world_size = world_size
        self.device_names = device_names
        self.origin = origin
        self._pending: dict[int, dict[int, StepReport]] = {}
        self._last_end: float | None = None
        self._tensor_memory: dict[str, dict[str, int]] = {}   # each device's, as last reported

    def add(self, rank: int, report: StepReport) -> Step | None:
        """The merged step once every rank reported ``report.step``, else None."""
        step = report.step
        reports = self._pending.setdefault(step, {})
        reports[rank] = report
        if len(reports) < self.world_size:
            return None
        del self._pending[step]
        return self._merge(step, list(reports.values()))

    def _merge(self, step: int, reports: list[StepReport]) -> Step:
        if self.pair_collectives:
            separate_collective_waits(reports)
        end = max(r.end for r in reports)
        start = self._last_end if self._last_end is not None else min(r.start for r in reports)
        evaluated = [r.start for r in reports if any(kind == "eval" for spans in r.intervals.values()
                                                     for kind, *_ in spans)]
        if evaluated:
            # a watched script evaluated before this step (engine/watch/instruments.py; on some ranks, the others
            # waiting for them meanwhile): the step starts once the last of them has
            start = max(start, max(evaluated))
        self._last_end = end
        time_s = max(end - start, 1e-9)
        intervals: dict[str, list] = {}
        for r in reports:
            for device, spans in r.intervals.items():
                intervals.setdefault(device, []).extend(spans)
        busy = {d: min(1.0, busy_time(intervals.get(d, [])) / time_s) for d in self.device_names}
        # Each device's own work, without drawing the batch (stage_busy): only where a step drew one.
        work = ({d: min(1.0, busy_time([i for i in intervals.get(d, []) if i[0] != "data"]) / time_s)
                 for d in self.device_names} if any(i[0] == "data" for v in intervals.values() for i in v) else None)
        losses = [r.loss_part for r in reports if r.loss_part is not None]
        samples = sum(r.samples or 0 for r in reports)
        split = next((r.batch_split for r in reports if r.batch_split is not None), None)
        # Ranks report their tensor memory when it changes: the step carries every device's when any did.
        changed = [r.tensor_memory for r in reports if r.tensor_memory]
        for memory in changed:
            self._tensor_memory.update(memory)
        return Step(
            step=step,
            t=end - self.origin,
            time_s=time_s,
            samples=samples,
            throughput=samples / time_s,
            loss=(sum(losses) if self.loss_parts else sum(losses) / len(losses)) if losses else None,
            busy=busy,
            work=work,
            intervals={d: [[k, t0 - self.origin, t1 - self.origin] for k, t0, t1 in sorted(v, key=lambda s: s[1])]
                       for d, v in intervals.items()},
            batch_split=split,
            # Each device's collectives belong to the one rank that runs it.
            communication={d: ops for r in reports for d, ops in (r.communication or {}).items()} or None,
            flops={d: count for r in reports for d, count in (r.flops or {}).items()} or None,
            tensor_memory={d: dict(k) for d, k in self._tensor_memory.items()} if changed else None,
        )
