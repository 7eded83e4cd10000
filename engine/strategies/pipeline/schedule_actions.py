"""The schedules' action lists, and the plan of the one-stage-per-device ones: torch-free but for the
multi-stage schedules, whose own classes compute theirs.

Each device runs its actions in turn; ``simulate`` plays the lists out with a
duration per action (an action starts when its device is free and its input is
there: a forward after the previous stage's forward of that micro-batch, a
backward or input gradient after the next stage's, a weight gradient after its
own stage's input gradient; from another device once sent: an overlapped pair's
outputs leave when the pair ends, and arrive late where the receiver's own pair
sends back first). ``engine.planner.what_if`` predicts step times with it;
``tick_plan`` draws GPipe's and 1F1B's plan with it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.strategies.pipeline.schedules import SCHEDULE_INFO, Schedule

COMPUTE_KINDS = ("F", "B", "I", "W")


@dataclass(frozen=True)
class Action:
    kind: str        # F, B, I or W
    stage: int
    micro_batch: int
    # Part of an overlapped pair (DualPipeV's OVERLAP_F_B) but its last: what it sends another device leaves when
    # the pair ends, as torch's runtime sends the pair's outputs after both parts (``_add_send_recv``).
    held: bool = field(default=False, compare=False)


def order(schedule: str, stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """GPipe's or 1F1B's actions on one stage, ("F" or "B", micro-batch), in the order their loop runs them."""
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


def actions(schedule: Schedule, devices: int, per_device: int, micro_batches: int) -> list[list[Action]]:
    """Each device's compute actions in the order it runs them."""
    if not schedule.multi_stage:
        return [[Action(kind, d, j) for kind, j in order(schedule.name, d, devices, micro_batches)]
                for d in range(devices)]
    return torch_actions(schedule, devices, per_device, micro_batches)


class _PlanOnlyStage:
    """What a multi-stage schedule's constructor reads of its stages to compute ``pipeline_order``."""

    def __init__(self, index: int, stages: int, devices: int):
        import torch
        self.stage_index, self.num_stages, self.group_size, self.group_rank = index, stages, devices, 0
        self.is_first, self.is_last = index == 0, index == stages - 1
        self.submod = torch.nn.Identity()


def torch_actions(schedule: Schedule, devices: int, per_device: int, micro_batches: int) -> list[list[Action]]:
    """The multi-stage schedule's own action list, as its torch class computes it (every rank computes every
    rank's, so one rank's stages stand for all; no process group needed). An overlapped forward and backward
    (DualPipeV) counts as the two in turn, the first ``held``."""
    from torch.distributed import pipelining
    n = devices * per_device
    stages = [_PlanOnlyStage(s, n, devices) for s in schedule.stages_of(0, devices, per_device)]
    order_of = getattr(pipelining, schedule.torch_class)(stages, n_microbatches=micro_batches,
                                                          loss_fn=lambda output, target: output).pipeline_order

    def flat(action) -> list[Action]:
        if action.sub_actions:
            parts = [a for sub in action.sub_actions for a in flat(sub)]
            return [Action(a.kind, a.stage, a.micro_batch, held=k < len(parts) - 1) for k, a in enumerate(parts)]
        kind = action.computation_type.value
        return [Action(kind, action.stage_index, action.microbatch_index)] if kind in COMPUTE_KINDS else []
    return [[a for action in order_of[d] if action is not None for a in flat(action)] for d in range(devices)]


def simulate(per_device_actions: list[list[Action]], duration, optimizer: list[float] | None = None,
             two_way_extra_s: float = 0.0):
    """(step time, {action: start}) of each device running its actions in turn, each when its input is there;
    ``duration(action)`` in seconds; ``optimizer``: each device's time after its last action.

    ``two_way_extra_s`` (engine/strategies/pipeline/exchange_probe.py): an overlapped pair's hand-over whose
    receiver ends a pair of its own, sending back to the first, before it takes the hand-over, arrives no sooner than that
    pair's end and this much more: two devices sending to each other at once, as DualPipeV's pairs do, wait for
    it (on cpu:2 over gloo its late hand-overs are exactly these). Which hand-overs meet depends on when they
    arrive, so the lists are played again until that settles: a delay once found is kept (the soonest arrivals
    only grow, so they settle; at most 8 plays)."""
    not_before: dict[tuple[str, int, int], float] = {}
    paired = two_way_extra_s > 0 and any(a.held for queue in per_device_actions for a in queue)
    for _ in range(8 if paired else 1):
        step, starts, play = _play(per_device_actions, duration, optimizer, not_before)
        if not paired:
            break
        found = play.two_way_arrivals(two_way_extra_s)
        later = {key: max(at, not_before.get(key, 0.0)) for key, at in found.items()}
        later.update({key: at for key, at in not_before.items() if key not in later})
        if later == not_before:
            break
        not_before = later
    return step, starts


@dataclass
class _Played:
    """What one play of the lists did with the hand-overs between devices."""
    made: dict[tuple[str, int, int], tuple[int, float]] = field(default_factory=dict)   # output: device, when
    sent: dict[tuple[str, int, int], float] = field(default_factory=dict)   # when it left (a pair's: at its end)
    taken: dict[tuple[str, int, int], tuple[int, float]] = field(default_factory=dict)   # by which device, when
    paired: set = field(default_factory=set)   # outputs of an overlapped pair
    pair_ends: list[tuple[int, float, set]] = field(default_factory=list)   # device, when, the devices it sent to

    def two_way_arrivals(self, extra_s: float) -> dict[tuple[str, int, int], float]:
        """The pair hand-overs met by a pair sent back before they were taken: when each can arrive at the
        soonest (``simulate``)."""
        arrivals = {}
        for key in self.paired:
            if key not in self.taken or key not in self.sent:
                continue
            maker, (taker, taken_at) = self.made[key][0], self.taken[key]
            back = [at for device, at, to in self.pair_ends
                    if device == taker and maker in to and self.sent[key] <= at <= taken_at]
            if back:
                arrivals[key] = min(back) + extra_s
        return arrivals


def _play(per_device_actions, duration, optimizer, not_before) -> tuple[float, dict, _Played]:
    p = len(per_device_actions)
    play = _Played()
    held: list[list[tuple[str, int, int]]] = [[] for _ in range(p)]
    starts: dict[Action, float] = {}
    free = [0.0] * p
    position = [0] * p
    last_stage = max(a.stage for queue in per_device_actions for a in queue)
    taker_of = {_input_of(a, last_stage): d for d, queue in enumerate(per_device_actions) for a in queue}

    def ready(needs, device: int) -> float | None:
        """When the output ``needs`` is there for ``device`` (None: not yet)."""
        if needs not in play.made:
            return None
        maker, at = play.made[needs]
        if maker == device:
            return at
        sent = play.sent.get(needs)
        return None if sent is None else max(sent, not_before.get(needs, 0.0))
    while any(position[d] < len(per_device_actions[d]) for d in range(p)):
        progressed = False
        for d in range(p):
            queue = per_device_actions[d]
            while position[d] < len(queue):
                action = queue[position[d]]
                needs = _input_of(action, last_stage)
                there = ready(needs, d) if needs is not None else free[d]
                if there is None:
                    break
                start = max(free[d], there)
                starts[action] = start
                if needs is not None and play.made[needs][0] != d:
                    play.taken[needs] = (d, start)
                free[d] = start + duration(action)
                outputs = [(action.kind, action.stage, action.micro_batch)]
                if action.kind == "I":   # a later full backward of the stage below needs it as it would a B
                    outputs.append(("B", action.stage, action.micro_batch))
                for key in outputs:
                    play.made[key] = (d, free[d])
                closes_pair = bool(held[d])
                held[d] += outputs
                if action.held or closes_pair:
                    play.paired.update(outputs)
                if not action.held:
                    play.sent.update(dict.fromkeys(held[d], free[d]))
                    if closes_pair:
                        to = {taker_of[key] for key in held[d] if taker_of.get(key, d) != d}
                        play.pair_ends.append((d, free[d], to))
                    held[d] = []
                position[d] += 1
                progressed = True
        if not progressed:
            raise ValueError("the action lists deadlock")
    return max(free[d] + (optimizer[d] if optimizer else 0.0) for d in range(p)), starts, play


def _input_of(action: Action, last_stage: int) -> tuple[str, int, int] | None:
    s, j = action.stage, action.micro_batch
    if action.kind == "F":
        return ("F", s - 1, j) if s > 0 else None
    if action.kind == "W":
        return ("I", s, j)
    # B or I: the gradient of the stage after, or the loss of this, the last
    return ("B", s + 1, j) if s < last_stage else ("F", s, j)


def tick_plan(schedule: str, stages: int, micro_batches: int) -> list[list[str]]:
    """GPipe's or 1F1B's actions per stage at the ticks they can run, each action one tick ("0F1": stage 0's
    forward of micro-batch 1; "" an idle tick): the plan of the one-stage-per-device schedules as their
    ``_step_microbatches`` run them (torch's own ``pipeline_order`` for them drops the idle ticks and, for
    1F1B's last stage, numbers the micro-batches from 1 in torch 2.14.1)."""
    _, starts = simulate(actions(SCHEDULE_INFO[schedule], stages, 1, micro_batches), lambda action: 1.0)
    plan = []
    for s in range(stages):
        row: list[str] = []
        for action, start in sorted(((a, t) for a, t in starts.items() if a.stage == s), key=lambda x: x[1]):
            row += [""] * (int(start) - len(row)) + [f"{s}{action.kind}{action.micro_batch}"]
        plan.append(row)
    return plan
