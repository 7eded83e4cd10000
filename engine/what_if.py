"""What-if: the step time and bubble of schedules and micro-batch counts not run, simulated from one run.

From a stored pipeline run with one stage per device, the measured steps' kept
timelines give each stage's forward and backward time per micro-batch and its
optimizer time per step. The GPipe and 1F1B action orders (as
torch.distributed.pipelining runs them: GPipe all forwards then all backwards;
1F1B ``min(m, p - s)`` forwards, then a backward and a forward in turn, then the
remaining backwards) are then played out: an action starts when its stage is
free and its input is there (a forward after the previous stage's forward of
that micro-batch, a backward after the next stage's backward). One figure is
fitted: a time per action beyond its timed compute (handing the activation or
gradient over, the schedule's own work), the value that makes the run's own
schedule take its measured step time. A micro-batch's compute is taken to scale
with its size (batch / m); the per-action time is not. On cpu:2 (mlp 512x8,
batch 2048) the predictions for GPipe and 1F1B at m = 2, 4, 8 from a run at
m = 4 landed within 6 % of the measured steps (a hand-over latency fitted
instead, which 1F1B's alternation puts on its critical path at every
micro-batch, was off by up to 14 % there and by 2.5x on a smaller model).
``make bench`` measures it again (README). The bubble is the timed compute's
idle share of the predicted step.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from engine.results import RunSummary

SIMULATED = ("gpipe", "1f1b")
TRUST = ("GPipe and 1F1B at other micro-batch counts, simulated from this run's time per micro-batch and stage "
         "(engine/what_if.py): within 4 % of measured runs on cpu:2 (mlp 512x8, `make bench`), less trustworthy "
         "where tiny micro-batches leave the devices waiting on per-call costs")
"""How far the predictions may be trusted, as the app and the command line say it."""


@dataclass(frozen=True)
class StageTimes:
    forward: float     # seconds per micro-batch (the last stage's loss included)
    backward: float    # seconds per micro-batch
    optimizer: float   # seconds per step


@dataclass(frozen=True)
class Prediction:
    schedule: str
    micro_batches: int
    step_time_s: float
    bubble: float
    measured: bool = False   # the run's own configuration: the fit, not a prediction


def stage_times(rows, devices: list[str], micro_batches: int, warmup: int) -> list[StageTimes] | None:
    """Per stage (device, in order), the mean per-micro-batch forward and backward and per-step optimizer
    time over the measured steps among the timeline ``rows`` (step, device, kind, t0, t1)."""
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
        values = per_step.get((device, kind), {})
        return statistics.fmean(values.get(s, 0.0) for s in steps)
    return [StageTimes(mean(d, "forward") / micro_batches, mean(d, "backward") / micro_batches,
                       mean(d, "optimizer")) for d in devices]


def order(schedule: str, stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """The stage's actions, ("F" or "B", micro-batch), in the order the schedule runs them."""
    m = micro_batches
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warmup = min(m, stages - stage)
    actions = [("F", j) for j in range(warmup)]
    forward, backward = warmup, 0
    while forward < m:
        actions += [("B", backward), ("F", forward)]
        backward, forward = backward + 1, forward + 1
    actions += [("B", j) for j in range(backward, m)]
    return actions


def simulate(schedule: str, times: list[StageTimes], micro_batches: int) -> float:
    """The step time of ``schedule`` over the stages' ``times`` at ``micro_batches``."""
    return _play(schedule, times, micro_batches)[0]


def tick_plan(schedule: str, stages: int, micro_batches: int) -> list[list[str]]:
    """The schedule's actions per stage at the ticks they can run, each action one tick ("0F1": stage 0's
    forward of micro-batch 1; "" an idle tick): the plan of the one-stage-per-device schedules as their
    ``_step_microbatches`` run them (torch's own ``pipeline_order`` for them drops the idle ticks and, for
    1F1B's last stage, numbers the micro-batches from 1 in torch 2.14.1)."""
    _, starts = _play(schedule, [StageTimes(1.0, 1.0, 0.0)] * stages, micro_batches)
    plan = []
    for s in range(stages):
        row: list[str] = []
        for (kind, j), start in sorted(((a, t) for (a, st), t in starts.items() if st == s), key=lambda x: x[1]):
            row += [""] * (int(start) - len(row)) + [f"{s}{kind}{j}"]
        plan.append(row)
    return plan


def _play(schedule: str, times: list[StageTimes], micro_batches: int):
    """(step time, {((kind, micro-batch), stage): start}) of the schedule's orders played out."""
    p = len(times)
    queues = [order(schedule, s, p, micro_batches) for s in range(p)]
    done: dict[tuple[str, int, int], float] = {}
    starts: dict = {}
    free = [0.0] * p
    position = [0] * p
    while any(position[s] < len(queues[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while position[s] < len(queues[s]):
                kind, j = queues[s][position[s]]
                if kind == "F":
                    needs = ("F", s - 1, j) if s > 0 else None
                else:
                    needs = ("B", s + 1, j) if s < p - 1 else ("F", s, j)
                if needs is not None and needs not in done:
                    break
                start = max(free[s], done[needs]) if needs is not None else free[s]
                starts[((kind, j), s)] = start
                free[s] = done[(kind, s, j)] = start + (times[s].forward if kind == "F" else times[s].backward)
                position[s] += 1
                progressed = True
        if not progressed:
            raise ValueError(f"the {schedule} order deadlocks at m={micro_batches}")
    return max(free[s] + times[s].optimizer for s in range(p)), starts


def fit_overhead(schedule: str, times: list[StageTimes], micro_batches: int, measured_step: float) -> float:
    """The time per action, beyond its timed compute, that makes ``schedule`` take the measured step time
    (bisection; 0 if the timed compute alone is slower than measured)."""
    def step_with(overhead: float) -> float:
        padded = [StageTimes(t.forward + overhead, t.backward + overhead, t.optimizer) for t in times]
        return simulate(schedule, padded, micro_batches)
    low, high = 0.0, measured_step
    if step_with(0.0) >= measured_step:
        return 0.0
    for _ in range(50):
        middle = (low + high) / 2
        if step_with(middle) < measured_step:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def predict(summary: RunSummary, rows, warmup: int, counts=(1, 2, 4, 8, 16)) -> list[Prediction]:
    """GPipe and 1F1B at each micro-batch count of ``counts`` that divides the batch (1F1B: at least one per
    stage), simulated from this run's stage times; [] for a run these do not describe."""
    m, schedule = summary.micro_batches or 1, summary.schedule or "gpipe"
    devices = list(summary.devices)
    if (summary.split is None or len(devices) < 2 or len(set(devices)) != len(devices)
            or schedule not in SIMULATED or not summary.step_time_s or not summary.batch_size):
        return []
    if summary.split and len(summary.split) + 1 != len(devices):
        return []  # several stages per device: not what these orders describe
    times = stage_times(rows, devices, m, warmup)
    if times is None:
        return []
    overhead = fit_overhead(schedule, times, m, summary.step_time_s.mean)
    out = []
    for target in SIMULATED:
        for count in counts:
            if summary.batch_size % count or (target == "1f1b" and count < len(devices)):
                continue
            scale = m / count  # a micro-batch's work scales with its size; its hand-over is per message
            padded = [StageTimes(t.forward * scale + overhead, t.backward * scale + overhead, t.optimizer)
                      for t in times]
            step = simulate(target, padded, count)
            busy = [count * (t.forward + t.backward) * scale + t.optimizer for t in times]
            bubble = 1.0 - statistics.fmean(b / step for b in busy)
            out.append(Prediction(target, count, step, bubble, measured=(target == schedule and count == m)))
    return out
