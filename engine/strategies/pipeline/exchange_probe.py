"""What sending both ways at once costs: a hand-over exchanged between two pipeline ranks against one way.

DualPipeV's overlapped pairs end close together on neighbouring devices, and
each sends both its outputs (a forward's activation, a backward's gradient) to
the other then. Over gloo on this project's 2-core machine such an exchange took
2.5-3 ms where the same two sends one way took 0.2-0.9 ms (``python -m
bench.gloo_exchange``), and DualPipeV's measured hand-overs waited accordingly.
A run of another schedule never sends both ways at once, so its timeline cannot
show this; engine/planner/what_if.py needs it to predict DualPipeV.

After the last step (after the split backward's probe, every rank there), ranks
0 and 1, 2 and 3, ... and then 1 and 2, 3 and 4, ... (every pair of neighbours)
exchange two tensors shaped as the largest activation any stage received on the
last step (``LastInputs``): ``TRIES`` times one way (the direction alternating)
and as many both ways, in turn, each after a barrier, with ``batch_isend_irecv``
as the schedules send (fewer tries where the first shows that the time budget
allows fewer: all ranks agree on how many). Each try's time is the slowest
rank's (an all-reduce); the extra is the both-ways mean less the one-way mean,
at least 0 (means, not minima: the stall comes and goes, and a step pays it as
often as it comes), the largest over the pairs. It includes any time the two
directions' transfers take from each other on the link, which a hand-over one
way never pays. A rank without a partner only meets the others; one that cannot
take part (its shapes unreadable, its tensors not made) says so in a collective,
so every rank returns None together.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from engine.strategies.pipeline.split_backward_probe import synchronize

TRIES = 16   # of each pattern: about 0.1-0.2 s on cpu:2


def handover_shape(kept, indices) -> tuple | None:
    """(shape, dtype) of the largest floating input this rank's stages after the first received on the last step
    (``kept``: split_backward_probe.LastInputs; ``indices``: the stages' numbers), or None."""
    shapes = [a[:2] for position, index in enumerate(indices) if index > 0
              for a in kept.inputs.get(position, ()) if isinstance(a, tuple)]
    return max(shapes, key=lambda s: s[0].numel(), default=None)


def two_way_extra_s(kept, indices, device: torch.device, budget_s: float = 10.0
                    ) -> tuple[float | None, str | None]:
    """(How much longer two ranks sending two hand-overs to each other at once take than the same sends one way,
    seconds; or None and why.) Every rank of the default group calls it together, and all return together: a
    rank that cannot take part says so in the collectives, never by leaving the others waiting in one."""
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        offers: list = [None] * world
        dist.all_gather_object(offers, _offer(kept, indices))
        problems = [f"rank {r}: {o[1]}" for r, o in enumerate(offers) if o[0] == "problem"]
        shapes = [o[1:] for o in offers if o[0] == "shape"]
        if problems or not shapes:
            return None, problems[0] if problems else "no stage received an activation on the last step"
        shape, dtype = max(shapes, key=lambda o: torch.Size(o[0]).numel())   # the largest hand-over
        pairings = [[(r, r + 1) for r in range(0, world - 1, 2)]]   # 0-1, 2-3, ...
        if world > 2:
            pairings.append([(r, r + 1) for r in range(1, world - 1, 2)])   # and 1-2, 3-4, ...: every neighbour
        extras = []
        for pairs in pairings:
            partner = next((b if a == rank else a for a, b in pairs if rank in (a, b)), None)
            extra = _measure(partner, torch.Size(shape), getattr(torch, dtype), device, budget_s / len(pairings))
            if extra is None:
                return None, "a rank could not make the tensors to send"
            extras.append(extra)
        return max(extras), None
    except Exception as exc:   # a backend that refuses a pattern, a timeout: the run stands
        return None, f"{type(exc).__name__}: {exc}"


def _offer(kept, indices) -> tuple:
    """What this rank brings: ("shape", shape, dtype name) of its hand-over, ("none",), or ("problem", why)."""
    try:
        found = handover_shape(kept, indices)
    except Exception as exc:  # noqa: BLE001  (said to every rank in the gather, not raised past it)
        return "problem", f"{type(exc).__name__}: {exc}"
    return ("none",) if found is None else ("shape", tuple(found[0]), str(found[1]).removeprefix("torch."))


def _measure(partner: int | None, shape, dtype, device: torch.device, budget_s: float) -> float | None:
    """The both-ways mean less the one-way mean with ``partner`` (None: only meet the others), each try the slowest
    rank's; None, on every rank, where a rank could not make its tensors."""
    try:
        outbox = [torch.randn(shape, device=device).to(dtype) for _ in range(2)]
        inbox = [torch.empty(shape, dtype=dtype, device=device) for _ in range(2)]
        ready = torch.ones(1, device=device)
    except Exception:  # noqa: BLE001  (out of memory on one device: every rank hears it below)
        outbox, inbox, ready = [], [], torch.zeros(1, device=device)
    dist.all_reduce(ready, op=dist.ReduceOp.MIN)
    if not ready.item():
        return None
    lower = partner is None or dist.get_rank() < partner
    times, tries = [], TRIES
    while len(times) < tries:
        began = time.perf_counter()
        sender = (len(times) % 2 == 0) == lower   # one way, the direction alternating
        times.append((_exchange(partner, outbox if sender else [], [] if sender else inbox, device),
                      _exchange(partner, outbox, inbox, device)))
        if len(times) == 1:   # how many tries the budget allows, agreed by all: each meets the others in each
            first = torch.tensor([time.perf_counter() - began], dtype=torch.float64, device=device)
            dist.all_reduce(first, op=dist.ReduceOp.MAX)
            tries = max(1, min(TRIES, int(budget_s / max(first.item(), 1e-9))))
    slowest = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    one_way, both_ways = slowest.cpu().mean(dim=0).tolist()
    return max(0.0, both_ways - one_way)


def _exchange(partner: int | None, outbox: list, inbox: list, device: torch.device) -> float:
    """Seconds from a barrier to this rank's sends of ``outbox`` and receives into ``inbox`` with ``partner``."""
    operations = []
    if partner is not None:
        operations = [dist.P2POp(dist.isend, tensor, partner) for tensor in outbox]
        operations += [dist.P2POp(dist.irecv, tensor, partner) for tensor in inbox]
    synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    if operations:
        for work in dist.batch_isend_irecv(operations):
            work.wait()
    synchronize(device)
    return time.perf_counter() - start
