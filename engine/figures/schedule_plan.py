"""The schedule plan figure: the pipeline schedule's own action list, what each device is to do at each tick.

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
from collections.abc import Sequence

from engine.figures.figure import Axis, Figure, Lanes

SCHEDULE_PLAN = Figure("plan", "The schedule's plan", Axis("tick of the schedule"), Axis("device"))
ACTION = re.compile(r"^(\d+)(F|B|I|W)(\d*)$")
OVERLAPPED = re.compile(r"^\((.*)\)OVERLAP_F_B$")
KIND_OF = {"F": "forward", "B": "backward", "I": "backward-input", "W": "backward-weight"}
KINDS = frozenset(KIND_OF.values())
LETTER = {kind: letter for letter, kind in KIND_OF.items()}


def schedule_plan_cells(plan: Sequence[Sequence[str]],
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


def schedule_plan_figure(plan: Sequence[Sequence[str]], devices: Sequence[str], schedule: str | None) -> Figure:
    cells = schedule_plan_cells(plan, devices)
    ticks = max((len(actions) for actions in plan), default=0)
    lanes = list(dict.fromkeys([*devices[:len(plan)], *(c[0] for c in cells)]))
    return SCHEDULE_PLAN.with_data(
        title=f"The {schedule or 'pipeline'} schedule's plan: each device's actions, tick by tick "
              "(torch.distributed.pipelining's own list)",
        lanes=Lanes(lanes, [(device, kind, t0, t1) for device, t0, t1, kind, _, _ in cells], ticks),
        columns=["device", "from tick", "to tick", "kind", "stage", "micro-batch"], rows=[list(c) for c in cells])


def action_label(kind: str, stage: int, micro_batch: int | None) -> str:
    """An action as torch writes it: "0F1", stage 0's forward of micro-batch 1."""
    return f"{stage}{LETTER[kind]}{'' if micro_batch is None else micro_batch}"


def measured_actions(plan: Sequence[Sequence[str]], devices: Sequence[str],
                     rows: Sequence[Sequence]) -> dict[tuple, tuple[int, int | None]]:
    """(stage, micro-batch) of each compute interval among the timeline ``rows`` (step, device, kind, t0, t1),
    keyed by the row: each device runs its plan's actions in turn, so a step's compute intervals on a device,
    in time order, are its plan's actions in order (the last stage's loss, timed as a forward of its own, right
    after its forward). A step whose intervals do not line up with the plan, kind by kind, gets none."""
    cells = schedule_plan_cells(plan, devices)
    if not cells:
        return {}
    last_stage = max(cell[4] for cell in cells)
    expected: dict[str, list[tuple[str, int, int | None]]] = {}
    for device, _, _, kind, stage, micro_batch in cells:
        expected.setdefault(device, []).append((kind, stage, micro_batch))
        if kind == "forward" and stage == last_stage:
            expected[device].append((kind, stage, micro_batch))
    steps: dict[tuple, list[tuple]] = {}
    for row in rows:
        if row[2] in KINDS:
            steps.setdefault((row[0], row[1]), []).append(tuple(row))
    out = {}
    for (_, device), mine in steps.items():
        want = expected.get(device)
        mine.sort(key=lambda row: row[3])
        if want is not None and [row[2] for row in mine] == [kind for kind, _, _ in want]:
            out.update((row, (stage, micro_batch)) for row, (_, stage, micro_batch) in zip(mine, want, strict=True))
    return out


def measured_cells(plan: Sequence[Sequence[str]], devices: Sequence[str],
                   rows: Sequence[Sequence]) -> list[tuple[str, float, float, str, int, int | None]]:
    """One step's compute intervals (timeline ``rows`` of that step) as the plan's cells are: (device, start,
    end, kind, stage, micro-batch), in milliseconds since the step's first interval; only those the plan names
    (``measured_actions``)."""
    actions = measured_actions(plan, devices, rows)
    if not actions:
        return []
    start = min(row[3] for row in rows)
    return [(device, (t0 - start) * 1e3, (t1 - start) * 1e3, kind, *actions[(step, device, kind, t0, t1)])
            for step, device, kind, t0, t1 in sorted(actions, key=lambda row: row[3])]
