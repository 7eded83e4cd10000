"""Merging the ranks' step reports into steps, and steps into the run summary (docs/summary.md)."""
from __future__ import annotations

import math
import statistics

from engine.config import ExperimentConfig
from engine.measure.timing import BUSY_KINDS, busy_time
from engine.record.rank_events import StepReport
from engine.record.efficiency import efficiency
from engine.record.findings import findings
from engine.record.totals import RunTotals
from engine.results import Bubble, Loss, NodeSummary, RunSummary, Step, TensorMemory
from engine.script_results import ScriptFacts
from engine.rules import model_label, watches_script
from engine.strategies import SCHEDULE_INFO, STRATEGIES


def _has_stages(strategy: str) -> bool:
    """Whether the registry's strategy splits the model (any text: the app asks with "" when idle)."""
    found = STRATEGIES.get(strategy)
    return found is not None and found.uses_split


def why_no_theory(strategy: str, stage_devices: list[str], micro_batches: int, own_processes: bool,
                  schedule: str = "gpipe") -> str | None:
    """Why no formula describes this split model's bubble; None where one does (or no split)."""
    if not _has_stages(strategy) or len(stage_devices) < 2:
        return None
    shared = sorted({d for d in stage_devices if stage_devices.count(d) > 1})
    if shared:
        return (f"no theoretical bubble: stages share {', '.join(shared)} and take turns on it, where "
                "(p-1)/(m+p-1) assumes a device per stage")
    if micro_batches > 1 and not own_processes:
        return ("no theoretical bubble: the stages run from one process, which waits on each device in turn, "
                "where (p-1)/(m+p-1) assumes stages that work concurrently")
    known = SCHEDULE_INFO.get(schedule)
    if micro_batches > 1 and known is not None and known.splits_backward:
        return (f"no closed-form bubble for {schedule}: it depends on how the forward, input-gradient and "
                "weight-gradient times compare (none when they are equal)")
    if 1 < micro_batches < len(stage_devices) and known is not None and known.multi_stage:
        return (f"no theoretical bubble: with fewer micro-batches ({micro_batches}) than devices "
                f"({len(stage_devices)}) each loop of {schedule} idles again, where (p-1)/(V*m+p-1) assumes m >= p")
    return None


def _interleaves(schedule: str, micro_batches: int) -> bool:
    known = SCHEDULE_INFO.get(schedule)
    return micro_batches > 1 and known is not None and known.multi_stage


def theoretical_bubble(strategy: str, stage_devices: list[str], micro_batches: int,
                       own_processes: bool, schedule: str = "gpipe", per_device: int = 1) -> float | None:
    """(p-1)/(m+p-1) for a pipeline of p stages and m micro-batches (the naive split is m=1); with V stages
    per device in a loop (interleaved 1F1B, looped BFS), (p-1)/(V*m+p-1) for p devices.

    None where no formula holds (``why_no_theory``): they assume each stage has a device of its own and,
    with m > 1, that the stages work concurrently, each in its own process; zero-bubble schedules have none.
    """
    p = len(stage_devices)
    if not _has_stages(strategy) or p < 2 or why_no_theory(strategy, stage_devices, micro_batches,
                                                           own_processes, schedule):
        return None
    v = per_device if _interleaves(schedule, micro_batches) else 1
    return (p - 1) / (v * micro_batches + p - 1)


def theory_formula(schedule: str, devices: int, micro_batches: int, per_device: int = 1) -> str:
    """The formula ``theoretical_bubble`` used, with its values, as the app and reports show it."""
    if _interleaves(schedule, micro_batches):
        return f"(p−1)/(V·m+p−1): p={devices}, V={per_device}, m={micro_batches}"
    return f"(p−1)/(m+p−1): p={devices} stages, m={micro_batches}"


def unique_devices(names: list[str]) -> list[str]:
    """Each physical device once, in order: per-device figures are per device, not per stage."""
    return list(dict.fromkeys(names))


def staged(strategy: str, devices: list[str]) -> bool:
    """A split model with one stage per device: per-device figures are per-stage figures."""
    return _has_stages(strategy) and 1 < len(devices) == len(set(devices))


def stage_busy(strategy: str, devices: list[str], totals: RunTotals) -> list[float] | None:
    """Each stage's busy share of the measured steps, leaving out drawing the batch ("data"):
    every rank draws the whole batch, which is no stage's share of the model."""
    if not staged(strategy, devices):
        return None
    return totals.busy_shares(work_only=True)


def stage_balance(strategy: str, devices: list[str], busy: list[float] | None) -> float | None:
    """The least busy stage's busy time over the busiest one's: 1.0 when the split gives every stage equal work.

    Busy time counts each stage's own work whatever the other stage does, so this
    finds the balanced split even when the step times of neighbouring splits are
    within the noise (two shared cores). None unless the run has stages on distinct devices.
    """
    if not staged(strategy, devices) or not busy:
        return None
    busiest = max(busy)
    return min(busy) / busiest if busiest > 0 else None


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
    for report, by_device in zip(reports, waits):
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


def summarize(*, run_id: str | None, status: str, config: ExperimentConfig, devices: list[str], split,
              micro_batches: int, batch_size: int, totals: RunTotals, param_sq_parts: list[float],
              data_parallel: bool, change_sq_parts: list[float] | None = None,
              theory_bubble: float | None = None, notes: list[str] | None = None,
              theory_text: str | None = None, plan: list[list[str]] | None = None,
              nodes: list[NodeSummary] | None = None,
              split_backward: dict[str, tuple[float, float | None]] | None = None,
              peaks: dict[str, dict] | None = None, two_way_extra_s: float | None = None,
              world: int = 1, script: ScriptFacts | None = None,
              unformulated: dict[str, float] | None = None, recording_cpu_s: float | None = None) -> RunSummary:
    """``devices``: each physical device once (``unique_devices``); ``totals`` of every merged step;
    ``theory_bubble`` from ``theoretical_bubble``; ``split_backward`` by device, from the ranks that
    measured it: (extra, of which fixed) seconds (engine.results.SplitCost); ``peaks``: each device's peak FLOP/s as
    its rank reported it (engine.record.efficiency); ``two_way_extra_s``: the pipeline ranks' exchange probe's (the
    slowest pair's); ``world``: the run's processes; ``script``: what a watched script's first rank read of it;
    ``unformulated``: the counted step's seconds in operations without a FLOP formula (engine/record/findings.py);
    ``recording_cpu_s``: the worker's CPU seconds a step (the session adds its own)."""
    devices_busy = totals.busy_shares()
    per_stage = stage_busy(config.strategy, devices, totals)
    kinds = totals.time_by_kind()
    pipelined = STRATEGIES[config.strategy].uses_micro_batches
    watched = watches_script(config)
    summary = RunSummary(
        run_id=run_id,
        status=status,
        strategy=config.strategy,
        model=model_label(config),
        devices=devices,
        split=list(split) if split else None,
        micro_batches=micro_batches if pipelined else None,
        schedule=config.schedule if pipelined else None,
        batch_size=None if watches_script(config) else batch_size,   # a script's batches are its own
        steps=totals.steps,
        steps_measured=totals.measured,
        step_time_s=totals.step_time.summary(),
        throughput=totals.throughput_summary(),
        loss=Loss(totals.first_loss, totals.last_loss) if totals.first_loss is not None else None,
        param_norm=math.sqrt(sum(param_sq_parts)) if param_sq_parts else None,
        # How far training moved the parameters: what equivalence between strategies is judged on.
        param_change=math.sqrt(sum(change_sq_parts)) if change_sq_parts else None,
        devices_busy=devices_busy,
        stage_busy=per_stage,
        stage_balance=stage_balance(config.strategy, devices, per_stage),
        bubble=Bubble(measured=1.0 - statistics.fmean(devices_busy) if devices_busy else None,
                      theory=theory_bubble, formula=theory_text if theory_bubble is not None else None),
        batch_split=totals.batch_split_counts() if data_parallel else None,
        tensor_memory=[TensorMemory(**totals.tensor_memory_peak[d]) if d in totals.tensor_memory_peak else None
                       for d in devices] if totals.tensor_memory_peak else None,
        communication=[totals.communication_per_step(d) for d in devices] if totals.communication else None,
        optimizer=(script.optimizer_text if script is not None and totals.steps else None) if watched
        else config.optimizer,
        dtype=(script.dtype if script is not None else None) if watched else config.dtype,
        script=script,
        notes=list(notes or []),
        plan=plan,
        nodes=list(nodes) if nodes else None,
        split_backward_extra_s=[split_backward.get(d, (None,))[0] for d in devices] if split_backward else None,
        split_backward_fixed_s=[split_backward.get(d, (None, None))[1] for d in devices] if split_backward else None,
        two_way_extra_s=two_way_extra_s,
        time_by_kind=kinds,
        efficiency=efficiency(totals, peaks or {}, config.peak),
        recording_cpu_s={"worker": recording_cpu_s} if recording_cpu_s is not None else None,
    )
    found = findings(summary, script=watched, world=world, unformulated=unformulated)
    return summary.replace(findings=found, diagnosis=found[0].text if found else None)
