"""The plan figure: the pipeline schedule's own action list, what each device is to do at each tick.

torch.distributed.pipelining computes it (``pipeline_order``: for each rank a
list of actions such as ``0F1``, stage 0's forward of micro-batch 1, with idle
ticks empty); rank 0 reports it with the run (``RunSummary.plan``). Drawn in
lanes like the measured timeline, one tick per cell, so the two read together:
where the machine and the plan disagree is where the timeline's gaps are not the
plan's. F is a forward, B a full backward, I and W a zero-bubble schedule's
input-gradient and weight-gradient halves; the bookkeeping actions (gradient
reduction) are left out.
"""
from __future__ import annotations

import re
from typing import Sequence

from engine.figures.figure import Axis, Figure, Lanes

PLAN = Figure("plan", "The schedule's plan", Axis("tick of the schedule"), Axis("device"))
ACTION = re.compile(r"^(\d+)(F|B|I|W)(\d*)$")
OVERLAPPED = re.compile(r"^\((.*)\)OVERLAP_F_B$")
KIND_OF = {"F": "forward", "B": "backward", "I": "backward-input", "W": "backward-weight"}


def plan_cells(plan: Sequence[Sequence[str]],
               devices: Sequence[str]) -> list[tuple[str, float, float, str, int, int | None]]:
    """(device, start, end, kind, stage, micro-batch) for every compute action of the plan, rank by rank, in
    ticks. An overlapped pair (DualPipeV's ``(0F3;3B1)OVERLAP_F_B``) shares its tick, half each."""
    cells = []
    for rank, actions in enumerate(plan):
        device = devices[rank] if rank < len(devices) else f"rank {rank}"
        for tick, action in enumerate(actions):
            overlapped = OVERLAPPED.match(action or "")
            parts = overlapped.group(1).split(";") if overlapped else [action or ""]
            for k, part in enumerate(parts):
                match = ACTION.match(part)
                if match:
                    cells.append((device, tick + k / len(parts), tick + (k + 1) / len(parts),
                                  KIND_OF[match.group(2)], int(match.group(1)),
                                  int(match.group(3)) if match.group(3) else None))
    return cells


def plan_figure(plan: Sequence[Sequence[str]], devices: Sequence[str], schedule: str | None) -> Figure:
    cells = plan_cells(plan, devices)
    ticks = max((len(actions) for actions in plan), default=0)
    lanes = list(dict.fromkeys([*devices[:len(plan)], *(c[0] for c in cells)]))
    return PLAN.with_data(
        title=f"The {schedule or 'pipeline'} schedule's plan: each device's actions, tick by tick "
              "(torch.distributed.pipelining's own list)",
        lanes=Lanes(lanes, [(device, kind, t0, t1) for device, t0, t1, kind, _, _ in cells], ticks),
        columns=["device", "from tick", "to tick", "kind", "stage", "micro-batch"], rows=[list(c) for c in cells])
