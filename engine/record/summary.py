"""The run summary from its merged steps (docs/summary.md); the steps are merged by engine/record/step_merger.py."""
from __future__ import annotations

import math
import statistics

from engine.config import ExperimentConfig
from engine.record.efficiency import efficiency
from engine.record.findings import findings
from engine.record.totals import RunTotals
from engine.results import Bubble, Loss, NodeSummary, RunSummary, TensorMemory
from engine.results.read_facts import ScriptFacts
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
        **_loss_and_parameters(totals, param_sq_parts, change_sq_parts),
        devices_busy=devices_busy,
        stage_busy=per_stage,
        stage_balance=stage_balance(config.strategy, devices, per_stage),
        bubble=_bubble(devices_busy, theory_bubble, theory_text),
        batch_split=totals.batch_split_counts() if data_parallel else None,
        **_memory_and_communication(totals, devices),
        **_optimizer_and_dtype(config, script, totals, watched=watched),
        script=script,
        notes=list(notes or []),
        plan=plan,
        nodes=list(nodes) if nodes else None,
        **_split_backward(split_backward, devices),
        two_way_extra_s=two_way_extra_s,
        time_by_kind=kinds,
        efficiency=efficiency(totals, peaks or {}, config.peak),
        recording_cpu_s={"worker": recording_cpu_s} if recording_cpu_s is not None else None,
    )
    found = findings(summary, script=watched, world=world, unformulated=unformulated)
    return summary.replace(findings=found, diagnosis=found[0].text if found else None)


def _loss_and_parameters(totals: RunTotals, param_sq_parts: list[float],
                         change_sq_parts: list[float] | None) -> dict:
    """The summary's ``loss``, ``param_norm`` and ``param_change``."""
    return dict(
        loss=Loss(totals.first_loss, totals.last_loss) if totals.first_loss is not None else None,
        param_norm=math.sqrt(sum(param_sq_parts)) if param_sq_parts else None,
        # How far training moved the parameters: what equivalence between strategies is judged on.
        param_change=math.sqrt(sum(change_sq_parts)) if change_sq_parts else None,
    )


def _bubble(devices_busy: list[float], theory_bubble: float | None, theory_text: str | None) -> Bubble:
    """The bubble as measured (the devices' mean idle share) beside its schedule's theory."""
    return Bubble(measured=1.0 - statistics.fmean(devices_busy) if devices_busy else None,
                  theory=theory_bubble, formula=theory_text if theory_bubble is not None else None)


def _memory_and_communication(totals: RunTotals, devices: list[str]) -> dict:
    """The summary's ``tensor_memory`` and ``communication``, a value per device."""
    return dict(
        tensor_memory=[TensorMemory(**totals.tensor_memory_peak[d]) if d in totals.tensor_memory_peak else None
                       for d in devices] if totals.tensor_memory_peak else None,
        communication=[totals.communication_per_step(d) for d in devices] if totals.communication else None,
    )


def _optimizer_and_dtype(config: ExperimentConfig, script: ScriptFacts | None, totals: RunTotals, *,
                         watched: bool) -> dict:
    """The summary's ``optimizer`` and ``dtype``: a watched script's as it read them, else the config's."""
    return dict(
        optimizer=(script.optimizer_text if script is not None and totals.steps else None) if watched
        else config.optimizer,
        dtype=(script.dtype if script is not None else None) if watched else config.dtype,
    )


def _split_backward(split_backward: dict[str, tuple[float, float | None]] | None, devices: list[str]) -> dict:
    """The summary's ``split_backward_extra_s`` and ``split_backward_fixed_s``, a value per device."""
    return dict(
        split_backward_extra_s=[split_backward.get(d, (None,))[0] for d in devices] if split_backward else None,
        split_backward_fixed_s=[split_backward.get(d, (None, None))[1] for d in devices] if split_backward else None,
    )
