"""What sending both ways at once costs: a hand-over exchanged between two pipeline ranks against one way.

DualPipeV's overlapped pairs end close together on neighbouring devices, and
each sends both its outputs (a forward's activation, a backward's gradient) to
the other then. Over gloo on this project's 2-core machine such an exchange took
2.5-3 ms where the same two sends one way took 0.2-0.5 ms (``python -m
bench.gloo_exchange``), and DualPipeV's measured hand-overs waited
accordingly. A run of another schedule never sends both ways at once, so its
timeline cannot show this; engine/plan/what_if.py needs it to predict DualPipeV.

After the last step (after the split backward's probe, every rank there), ranks
0 and 1, 2 and 3, ... exchange two tensors shaped as the largest activation a
stage received on the last step (``LastInputs``): ``TRIES`` times one way (the
direction alternating) and as many both ways, in turn, each after a barrier, with
``batch_isend_irecv`` as the schedules send (fewer tries where the first shows
that the time budget allows fewer: all ranks agree on how many). Each try's time
is the slowest rank's (an all-reduce); the extra is the both-ways mean less the one-way mean, at
least 0 (means, not minima: the stall comes and goes, and a step pays it as often
as it comes). A rank without a partner (an odd last one) only meets the others.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

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
    seconds; or None and why.) Every rank of the default group calls it together."""
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        offers: list = [None] * world
        dist.all_gather_object(offers, _plain(handover_shape(kept, indices)))
        offer = next((o for o in offers if o is not None), None)
        if offer is None:
            return None, "no stage received an activation on the last step"
        shape, dtype = torch.Size(offer[0]), getattr(torch, offer[1])
        partner = rank + 1 if rank % 2 == 0 else rank - 1
        partner = partner if partner < world else None
        times, tries = [], TRIES
        while len(times) < tries:
            began = time.perf_counter()
            sender = (len(times) % 2 == 0) == (rank % 2 == 0)   # one way: the direction alternates
            times.append((_exchange(partner, shape, dtype, device, sends=2 * sender, receives=2 * (not sender)),
                          _exchange(partner, shape, dtype, device, sends=2, receives=2)))
            if len(times) == 1:   # how many tries the budget allows, agreed by all: each meets the others in each
                first = torch.tensor([time.perf_counter() - began], dtype=torch.float64, device=device)
                dist.all_reduce(first, op=dist.ReduceOp.MAX)
                tries = max(1, min(TRIES, int(budget_s / max(first.item(), 1e-9))))
        slowest = torch.tensor(times, dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        one_way, both_ways = slowest.cpu().mean(dim=0).tolist()
        return max(0.0, both_ways - one_way), None
    except Exception as exc:   # a backend that refuses a pattern, a timeout: the run stands
        return None, f"{type(exc).__name__}: {exc}"


def _plain(offer) -> tuple | None:
    """The shape offer as plain values (all_gather_object pickles it)."""
    return None if offer is None else (tuple(offer[0]), str(offer[1]).removeprefix("torch."))


def _exchange(partner: int | None, shape, dtype, device: torch.device, sends: int, receives: int) -> float:
    """Seconds from a barrier to this rank's sends and receives with ``partner`` done."""
    operations = []
    if partner is not None:
        operations = [dist.P2POp(dist.isend, torch.randn(shape, device=device).to(dtype), partner)
                      for _ in range(sends)]
        operations += [dist.P2POp(dist.irecv, torch.empty(shape, dtype=dtype, device=device), partner)
                       for _ in range(receives)]
    _synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    if operations:
        for work in dist.batch_isend_irecv(operations):
            work.wait()
    _synchronize(device)
    return time.perf_counter() - start


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
