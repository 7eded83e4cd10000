"""What-if: the step time and bubble of schedules, micro-batch counts and stages per device not run,
simulated from one run.

From a stored pipeline run with one process per device, the measured steps'
kept timelines give each device's forward, backward (or input- and
weight-gradient) time per micro-batch and its optimizer time per step. Each
candidate schedule's action list (engine/strategies/pipeline/schedule_actions.py) is
then played out: for GPipe and 1F1B the order their own loop runs (``order``:
GPipe all forwards then all backwards; 1F1B ``min(m, p - s)`` forwards, then a
backward and a forward in turn, then the remaining backwards), for the
multi-stage schedules torch's own ``pipeline_order``, computed by the schedule
class itself (``torch_actions``: importing torch, which ``run``'s process and the
app's never do, so they ask for GPipe and 1F1B alone or ask ``main.py what-if``).
Each device runs its actions in order; an action starts when its device is free
and its input is there (a forward after the previous stage's forward of that
micro-batch, a backward or input gradient after the next stage's, a weight
gradient after its own stage's input gradient; DualPipeV's overlapped pair sends
its outputs when both its parts are done, as torch's runtime does, and one whose
receiver's own pair sends back before taking it arrives late, below).

Assumptions, each a source of error: a device's work is the same whatever the
schedule, shared evenly among the V stages it holds; a micro-batch's compute
scales with its size (batch / m); a backward the run did not split divides
evenly into input and weight gradient, and split costs what the run measured
after its last step (``RunSummary.split_backward_extra_s``,
engine/strategies/pipeline/split_backward_probe.py) more, shared by the two halves: a
time per call (torch's graph walk before the input gradient) and a part that
grows with the micro-batch (a 2-block stage of mlp 512x8 on cpu:2 measured
alone: 0.6 ms at 32 samples, 0.7 at 256, 1.6 at 1,024), told apart by the
probe's second, half-sized micro-batch (``split_backward_fixed_s``; an older
run's is all per call). Without it ZB-V and DualPipeV were predicted 6-15 %
fast on a quiet machine; with it taken as all per call, ZB-V's error grew with
the micro-batch count (+2.6, +3.8, +6.4 % at m = 2, 4, 8, 2026-12-05). One figure is fitted: the time a
hand-over to or from another device (an activation or a gradient) adds to the
action that makes it, on both sides (gloo's send and receive each occupy their
process), the value that makes the run's own schedule take its measured step
time; it does not scale with the micro-batch. Counting hand-overs, not actions,
is what lets one run at V = 1 speak for four stages on two devices, where every
stage boundary crosses devices: on cpu:2 (mlp 512x8, batch 2048) every schedule
at m = 2, 4, 8 landed within 8 % of its measured step (2026-12-01; within 10 %
since for DualPipeV at m = 8, once the two-way exchange below is counted), where a time per action
was off by up to 14 % for the interleaved ones and a fitted hand-over latency
(1F1B's alternation puts it on its critical path) by 14 % for 1F1B and by 2.5x
on a smaller model. ``make bench`` measures it again (README). The bubble is the
timed compute's idle share of the predicted step.

Measured after the run, and the largest error it took away: two devices sending
to each other at once. DualPipeV's overlapped pairs end close together on
neighbouring devices and each sends both its outputs then; over gloo such an
exchange takes longer than the same sends one way (on cpu:2 2.5-3 ms against
0.2-0.9 in ``python -m bench.gloo_exchange``), and a run of another schedule
never shows it. Its late hand-overs were exactly those whose receiver's own pair
sent back before taking them (1.3-1.8 ms on average from the receiver's pair
end, against 0.3 where the receiver's sends came first, and ZB-V's 0.3-0.6 in
both cases), and without them DualPipeV at m = 8 came out 8-16 % fast (three
bench runs: -13, -16, -8 %). The run's ranks now measure the exchange after the
last step (``RunSummary.two_way_extra_s``, engine/strategies/pipeline/exchange_probe.py:
the both-ways mean less the one-way mean, 0.4-2.4 ms on cpu:2), and such a
hand-over arrives no sooner than the receiver's pair end plus it (``simulate``'s
``two_way_extra_s``); DualPipeV at m = 8 came out -0.1, -9.9, +0.0, -3.8 % in four
bench runs (2026-12-05; every other schedule is untouched by it). Runs stored
before it count it as 0. Not modelled: a cost each stage call pays whatever its
size (a device's forward and backward grow 0.3-0.8 ms a step with each further
call, every schedule alike); the fitted hand-over time stands in for it, and
taken from the same round's GPipe runs at m = 2, 4, 8 it moved ZB-V, the
interleaved and the looped ones at m = 8 up by 5-11 points. Delays of a
hand-over itself (a transfer time; a receive posted while the sender computes,
which gloo on one core serves late) made every multi-stage prediction worse: the
fit gives their time back out of the per-hand-over one. Judge a change to the
model on stored bench runs first: ``python -m bench.engine_bench
--predictions-from DB``.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from engine.results import RunSummary, SplitCost
from engine.strategies.pipeline.schedule_actions import Action, actions, simulate
from engine.strategies.pipeline.schedules import SCHEDULE_INFO, SCHEDULE_LIST, Schedule

TRUST = ("simulated from this run's time per micro-batch and device (engine/planner/what_if.py); on cpu:2 within "
         "10 % of measured runs, most within 5 %")
TRUST_DETAIL = ("every schedule, micro-batch count and stages per device, from this run's timed actions and what it "
                "measured after its last step: a split backward's cost and two devices' sending to each other at "
                "once. On cpu:2 (mlp 512x8, `make bench`) every prediction fell within 10 % of the measured runs and "
                "most within 5 %, in both directions: about as far as reruns of one setting differ "
                "(none leans by more than 2 % on average). Less trustworthy where tiny micro-batches "
                "leave the devices waiting on per-call costs (up to 22 % off at 20 ms steps), or where stages are "
                "unbalanced.")
"""How far the predictions may be trusted, as the app and the command line say it: in a line (TRUST), and in
full (TRUST_DETAIL: the app's tooltip, the command line's line after the table)."""

MICRO_BATCH_COUNTS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class DeviceTimes:
    """One device's timed work, summed over the stages it holds."""
    forward: float          # seconds per micro-batch (the last stage's loss included)
    backward: float         # seconds per micro-batch, input and weight gradient together
    backward_input: float   # the part a split backward spends on the input gradient
    optimizer: float        # seconds per step
    split: SplitCost = SplitCost(0.0, 0.0)   # how much longer a micro-batch's backward takes split in two

    @property
    def backward_weight(self) -> float:
        return self.backward - self.backward_input


@dataclass(frozen=True)
class Prediction:
    schedule: str
    micro_batches: int
    step_time_s: float
    bubble: float
    measured: bool = False   # the run's own configuration: the fit, not a prediction
    stages_per_device: int = 1


def device_times(rows, devices: list[str], micro_batches: int, warmup: int,
                 split: list[SplitCost] | None = None, incurred: list[float] | None = None
                 ) -> list[DeviceTimes] | None:
    """Per device (in stage order), the per-micro-batch forward and backward and per-step optimizer time: each
    kind's median over the measured steps among the timeline ``rows`` (step, device, kind, t0, t1). ``split``: per
    device, what splitting a micro-batch's backward on its stages adds; ``incurred``: the part of it the run's
    own split backwards spent (taken out of the backward it timed); both None: nothing."""
    per_step: dict[tuple[str, str], dict[int, float]] = {}
    steps = set()
    for step, device, kind, t0, t1 in rows:
        if step < warmup or device not in devices:
            continue
        steps.add(step)
        bucket = per_step.setdefault((device, kind), {})
        bucket[step] = bucket.get(step, 0.0) + (t1 - t0)
    if not steps:
        return None

    def mean(device: str, kind: str) -> float:
        # the kind's median over the steps: a step that load slowed (on a shared machine, up to twice the
        # others) moves a mean over a dozen steps by several per cent, and with it every prediction
        values = per_step.get((device, kind), {})
        return statistics.median(values.get(s, 0.0) for s in steps)
    out = []
    for index, d in enumerate(devices):
        own_extra = incurred[index] if incurred else 0.0
        full, split_input, split_weight = mean(d, "backward"), mean(d, "backward-input"), mean(d, "backward-weight")
        backward = (full + split_input + split_weight) / micro_batches - own_extra
        # A backward run whole is taken to divide evenly: its input and weight gradients cost alike.
        backward_input = (split_input + full / 2) / micro_batches - own_extra / 2
        out.append(DeviceTimes(mean(d, "forward") / micro_batches, backward, backward_input, mean(d, "optimizer"),
                               split[index] if split else SplitCost(0.0, 0.0)))
    return out


def split_share(schedule: Schedule, device: int, devices: int, per_device: int) -> float:
    """The share of the device's stages whose backward ``schedule`` splits: none unless it splits backwards,
    and never stage 0 (torch runs its backward whole in every schedule)."""
    if not schedule.splits_backward:
        return 0.0
    stages = schedule.stages_of(device, devices, per_device)
    return sum(1 for stage in stages if stage != 0) / len(stages)


def split_extras(summary: RunSummary, own: Schedule, own_per_device: int) -> tuple[list[SplitCost], list[float]]:
    """Per device, what splitting a micro-batch's backward on its stages adds (the run's probe; 0 where not
    measured; all of it per call where the probe did not tell), and the part of it the run's own schedule spent:
    none where it ran its backwards whole, and never on stage 0, whose backward torch runs whole in every
    schedule."""
    p = len(summary.devices)
    extra = [max(0.0, value or 0.0) for value in (summary.split_backward_extra_s or [None] * p)]
    fixed = summary.split_backward_fixed_s or [None] * p
    costs = [SplitCost(e, e if f is None else min(e, max(0.0, f))) for e, f in zip(extra, fixed, strict=False)]
    return costs, [extra[device] * split_share(own, device, p, own_per_device) for device in range(p)]


@dataclass(frozen=True)
class _Model:
    """The candidate's action durations: the run's device times shared over V stages, scaled to the
    micro-batch size, plus the fitted time per hand-over between devices."""
    schedule: Schedule
    devices: int
    per_device: int
    times: list[DeviceTimes]
    scale: float            # the run's micro-batches / the candidate's
    overhead: float
    two_way: float = 0.0    # RunSummary.two_way_extra_s

    def duration(self, action: Action) -> float:
        device = self.schedule.stage_device(action.stage, self.devices)
        t = self.times[device]
        compute = {"F": t.forward, "B": t.backward, "I": t.backward_input, "W": t.backward_weight}[action.kind]
        # at this micro-batch size, shared by the device's V stages; torch runs stage 0's backward whole whatever
        # the schedule
        split = t.split.at(self.scale) / 2 if action.kind in ("I", "W") and action.stage != 0 else 0.0
        return (compute * self.scale + split) / self.per_device + self.overhead * self.messages(action, device)

    def messages(self, action: Action, device: int) -> int:
        """The hand-overs to or from another device the action makes: its input in, its output out (a forward
        from the stage before and to the one after, a backward the other way; a weight gradient none)."""
        if action.kind == "W":
            return 0
        last = self.devices * self.per_device - 1
        return sum(1 for neighbour in (action.stage - 1, action.stage + 1)
                   if 0 <= neighbour <= last and self.schedule.stage_device(neighbour, self.devices) != device)

    def step(self, micro_batches: int) -> float:
        plan = actions(self.schedule, self.devices, self.per_device, micro_batches)
        return simulate(plan, self.duration, [t.optimizer for t in self.times], self.two_way)[0]


def fit_overhead(schedule: Schedule, per_device: int, times: list[DeviceTimes], micro_batches: int,
                 measured_step: float, two_way: float = 0.0) -> float:
    """The time per hand-over between devices, beyond the timed compute, that makes ``schedule`` take the
    measured step time (bisection; 0 if the timed compute alone is slower than measured)."""
    plan = actions(schedule, len(times), per_device, micro_batches)

    def step_with(overhead: float) -> float:
        model = _Model(schedule, len(times), per_device, times, 1.0, overhead, two_way)
        return simulate(plan, model.duration, [t.optimizer for t in times], two_way)[0]
    low, high = 0.0, measured_step
    if step_with(0.0) >= measured_step:
        return 0.0
    for _ in range(40):
        middle = (low + high) / 2
        if step_with(middle) < measured_step:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def candidates(summary: RunSummary, devices: int, own_per_device: int, multi_stage: bool = True):
    """(schedule, V, m) for every schedule torch can run (only GPipe and 1F1B without ``multi_stage``) at each
    micro-batch count dividing the batch, the run's own among them: V its default and, where it allows it,
    the run's. (Not checked: whether the model has blocks for p x V stages; the check before a run says.)"""
    counts = sorted({*MICRO_BATCH_COUNTS, summary.micro_batches or 1})
    for schedule in SCHEDULE_LIST:
        if schedule.multi_stage and not multi_stage:
            continue
        for per_device in dict.fromkeys(v for v in (schedule.stages_per_device[0], own_per_device)
                                        if v in schedule.stages_per_device):
            for m in counts:
                if summary.batch_size % m == 0 and schedule.micro_batch_problem(m, devices, per_device) is None:
                    yield schedule, per_device, m


def unpredictable(summary: RunSummary) -> str | None:
    """Why this run's timeline cannot stand for the schedules' action lists, or None."""
    devices = list(summary.devices)
    if summary.split is None or (summary.schedule or "gpipe") not in SCHEDULE_INFO:
        return "what-if predicts pipeline schedules from a run split into stages; this run is not"
    if len(devices) < 2 or not _one_process_per_device(summary.strategy, devices):
        return ("what-if needs one process per device (CPU virtual devices, or a pipeline over distinct GPUs); "
                "this run's stages shared a process")
    if (len(summary.split) + 1) % len(devices):
        return "what-if needs the same number of stages on every device"
    if not summary.step_time_s or not summary.batch_size:
        return "the run measured no step"
    return None


def _one_process_per_device(strategy: str, devices: list[str]) -> bool:
    """The run's strategy put each device's stages in a process of its own (the naive split on GPUs keeps
    the tutorial's one process): asked of the strategy, from the device names."""
    from engine.devices import Device, node_of
    from engine.strategies import STRATEGIES
    known = STRATEGIES.get(strategy)

    def device(name: str) -> Device:
        local = name.rpartition("/")[2]  # "node1/cpu:0": every node has its own cpu:0
        kind, _, index = local.partition(":")
        return Device(name, kind, int(index) if index.isdigit() else 0, node=node_of(name))
    placed = [device(name) for name in devices]
    return known is not None and len(set(devices)) == len(devices) and known.world_size(None, placed) == len(devices)


def predict(summary: RunSummary, rows, warmup: int, multi_stage: bool = True,
            step_times: list[float] | None = None) -> list[Prediction]:
    """Every candidate (``candidates``) simulated from this run's device times over the timeline ``rows``;
    [] for a run these do not describe (``unpredictable``). Without ``multi_stage``, GPipe and 1F1B only, from a
    run of either: their lists need no torch, the multi-stage schedules' come from torch's classes. The fit
    reproduces the median of ``step_times`` (the measured steps'), or without them the run's mean step: the
    predictions are of a step that load did not slow, as each kind's device time is its median over the steps."""
    if unpredictable(summary):
        return []
    # the naive split (model-parallel) is GPipe with one micro-batch
    m, own = summary.micro_batches or 1, SCHEDULE_INFO[summary.schedule or "gpipe"]
    if own.multi_stage and not multi_stage:
        return []
    devices = list(summary.devices)
    p = len(devices)
    own_per_device = (len(summary.split) + 1) // p
    times = device_times(rows, devices, m, warmup, *split_extras(summary, own, own_per_device))
    if times is None:
        return []
    measured_step = statistics.median(step_times) if step_times else summary.step_time_s.mean
    two_way = summary.two_way_extra_s or 0.0
    overhead = fit_overhead(own, own_per_device, times, m, measured_step, two_way)
    out = []
    for schedule, per_device, count in candidates(summary, p, own_per_device, multi_stage):
        step, bubble = simulated_step(schedule, per_device, times, count, m / count, overhead, two_way)
        measured = (schedule, per_device, count) == (own, own_per_device, m)
        out.append(Prediction(schedule.name, count, step, bubble, measured, per_device))
    return out


def simulated_step(schedule: Schedule, per_device: int, times: list[DeviceTimes], micro_batches: int,
                   scale: float = 1.0, overhead: float = 0.0, two_way: float = 0.0) -> tuple[float, float]:
    """(step time, bubble) of ``schedule`` at ``micro_batches`` over ``len(times)`` devices with ``per_device``
    stages each: its action list played out with each device's ``times`` per micro-batch (times ``scale``: the
    measured micro-batch's size over the candidate's), ``overhead`` seconds per hand-over between devices and
    ``two_way`` (RunSummary.two_way_extra_s). ``predict`` simulates every candidate of a run with it, and
    engine/advise every pipeline candidate of a model from its probe."""
    p = len(times)
    model = _Model(schedule, p, per_device, times, scale, overhead, two_way)
    step = model.step(micro_batches)
    busy = [micro_batches * (t.forward + t.backward) * scale + t.optimizer
            + micro_batches * split_share(schedule, device, p, per_device) * t.split.at(scale)
            for device, t in enumerate(times)]
    return step, 1.0 - statistics.fmean(b / step for b in busy)


def measured_inputs(summary: RunSummary | None, schedules) -> list[str]:
    """What the predictions of ``schedules`` (names) take from the probes after the run's last step, a line each:
    what a split backward costs (the zero-bubble schedules) and what two devices' sending to each other at once
    costs (DualPipeV's overlapped pairs); the command line's lines under its table, the Plan tab's tooltip."""
    if summary is None:
        return []
    shown = [SCHEDULE_INFO[name] for name in schedules if name in SCHEDULE_INFO]
    lines = []
    extra = summary.split_backward_extra_s
    if extra and any(s.splits_backward for s in shown):
        fixed = summary.split_backward_fixed_s or [None] * len(extra)
        per_device = ", ".join(f"{device} " + (f"{value * 1e3:+.2f} ms" if value is not None else "—")
                               + (f" ({part * 1e3:.2f} of it per call)" if part is not None else "")
                               for device, value, part in zip(summary.devices, extra, fixed, strict=False))
        lines.append(f"a backward split into input and weight gradient costs {per_device} per micro-batch "
                     "(measured after the run, the rest growing with its samples; the zero-bubble schedules' "
                     "lines include it)")
    if summary.two_way_extra_s is not None and any(s.overlaps_pairs for s in shown):
        lines.append(f"two devices sending hand-overs to each other at once take {summary.two_way_extra_s * 1e3:.2f} "
                     "ms longer than one way (measured after the run; DualPipeV's overlapped pairs do it, its lines "
                     "include it)")
    return lines


def predict_stored(store, run_id: str, last_steps: int = 50, multi_stage: bool = True) -> list[Prediction]:
    """``predict`` for a finished run in ``store`` (an engine.store.Store), from its last kept steps."""
    record = store.get_run(run_id)
    if record is None or record.summary is None or record.status != "finished":
        return []
    kept = store.timeline_steps(run_id, last=last_steps)
    measured = [step for step in kept if step >= record.config.warmup]
    return predict(record.summary, store.timeline(run_id, steps=kept), record.config.warmup, multi_stage,
                   store.step_times(run_id, measured))
