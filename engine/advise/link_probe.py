"""What the devices' communication costs, measured by one process on each device as a run's ranks hold them.

Advise predicts ddp's all-reduce, FSDP's all-gathers and reduce-scatters, tensor parallel's all-reduces and a
pipeline's hand-overs from these (engine/advise/predict.py). The probe's process is rank 0 on the first device; it
forks one process for each further device (before any of them computes: a forked process must not inherit a
thread pool), each pinned to its device's core with one intra-op thread as engine/run/rank.py pins a rank, and
they meet through a file as a run's ranks do, over gloo on CPU devices and NCCL on GPUs. Measured, each try from a
barrier to the slowest process's end (the median of ``TRIES``, after one to warm up):

- a hand-over from one device to its neighbour (``batch_isend_irecv``, as the schedules send), at a small size
  and at the model's hand-over size, the direction alternating: a latency and a time per byte;
- the same two neighbours sending to each other at once (DualPipeV's overlapped pairs do: gloo serves it late,
  engine/strategies/pipeline/exchange_probe.py), beyond one way;
- an all-reduce, an all-gather and a reduce-scatter over every device, at a small size and at the parameters'
  size (at most ``LARGEST``: each line goes on from there).

On a shared machine the medians move with the load as a run's own collectives do.
"""
from __future__ import annotations

import os
import shutil
import signal
import statistics
import tempfile
import time
from datetime import timedelta

from engine.advise.results import Cost, LinkProbe
from engine.devices import Device

TRIES = 6                 # of each measurement, after one to warm up
SMALL = 4 << 10           # bytes: what a latency is read at
LARGEST = 16 << 20        # bytes: larger payloads are read off the line through the two sizes
SMALLEST_LARGE = 256 << 10
JOIN_TIMEOUT_S = 60.0


def probe_links(devices: list[Device], handover_bytes: int, param_bytes: int) -> LinkProbe:
    """Every device's process measuring together; returns rank 0's reading (the slowest process's times)."""
    started = time.perf_counter()
    folder = tempfile.mkdtemp(prefix="splitscope-advise-")
    store_file = os.path.join(folder, "rendezvous")
    parent = os.getpid()
    children = []
    try:
        for rank in range(1, len(devices)):
            pid = os.fork()
            if pid == 0:   # a further device's process: measure, then leave without running the parent's cleanup
                code = 1
                try:
                    from engine.parent_death import die_with_parent
                    die_with_parent(parent)
                    _measure(rank, devices, store_file, handover_bytes, param_bytes)
                    code = 0
                finally:
                    os._exit(code)
            children.append(pid)
        costs = _measure(0, devices, store_file, handover_bytes, param_bytes)
    except BaseException:
        for pid in children:   # stuck in a rendezvous or a collective that rank 0 will never join
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise
    finally:
        for pid in children:
            os.waitpid(pid, 0)
        shutil.rmtree(folder, ignore_errors=True)
    return LinkProbe(len(devices), *costs, seconds=time.perf_counter() - started)


def _measure(rank: int, devices: list[Device], store_file: str, handover_bytes: int, param_bytes: int):
    import torch
    import torch.distributed as dist
    device = devices[rank]
    if device.kind == "cpu" and device.core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {device.core})
    torch.set_num_threads(1)
    if device.kind == "cuda":
        torch.cuda.set_device(device.index)
    world = len(devices)
    dist.init_process_group("nccl" if device.kind == "cuda" else "gloo", store=dist.FileStore(store_file, world),
                            rank=rank, world_size=world, timeout=timedelta(seconds=JOIN_TIMEOUT_S))
    try:
        where = device.torch_device
        large_handover = min(LARGEST, max(SMALLEST_LARGE, handover_bytes))
        large_params = min(LARGEST, max(SMALLEST_LARGE, param_bytes))
        one_way = {size: _timed(lambda k, size=size: _hand_over(rank, size, where, both_ways=False, turn=k), where)
                   for size in (SMALL, large_handover)}
        both_ways = _timed(lambda k: _hand_over(rank, large_handover, where, both_ways=True, turn=k), where)
        collectives = []
        for operation in (_all_reduce, _all_gather, _reduce_scatter):
            times = {size: _timed(lambda k, size=size, operation=operation: operation(size, world, where), where)
                     for size in (SMALL, large_params)}
            collectives.append(_line(times))
        return (_line(one_way), max(0.0, both_ways - one_way[large_handover]), *collectives)
    finally:
        dist.destroy_process_group()


def _timed(operation, where: str) -> float:
    """The median over ``TRIES`` of the slowest process's time from a barrier to ``operation(try)``'s end."""
    import torch
    import torch.distributed as dist
    times = []
    for k in range(TRIES + 1):
        _synchronize(where)
        dist.barrier()
        start = time.perf_counter()
        operation(k)
        _synchronize(where)
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times[1:], dtype=torch.float64, device=where)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return statistics.median(slowest.cpu().tolist())


def _hand_over(rank: int, size: int, where: str, *, both_ways: bool, turn: int) -> None:
    """Devices 0 and 1 (the others only meet them at the barrier): one sends ``size`` bytes to the other, the
    direction alternating with ``turn``; with ``both_ways`` each sends to the other at once."""
    import torch
    import torch.distributed as dist
    if rank > 1:
        return
    partner = 1 - rank
    sends = both_ways or turn % 2 == rank
    receives = both_ways or not sends
    operations = []
    if sends:
        operations.append(dist.P2POp(dist.isend, torch.ones(size // 4, device=where), partner))
    if receives:
        operations.append(dist.P2POp(dist.irecv, torch.empty(size // 4, device=where), partner))
    for work in dist.batch_isend_irecv(operations):
        work.wait()


def _all_reduce(size: int, world: int, where: str) -> None:
    import torch
    import torch.distributed as dist
    dist.all_reduce(torch.ones(size // 4, device=where))


def _all_gather(size: int, world: int, where: str) -> None:
    """Gathering ``size`` bytes in all (an FSDP block's parameters): each device brings its 1/world."""
    import torch
    import torch.distributed as dist
    shard = max(1, size // 4 // world)
    dist.all_gather_single(torch.empty(shard * world, device=where), torch.ones(shard, device=where))


def _reduce_scatter(size: int, world: int, where: str) -> None:
    """Reducing ``size`` bytes in all (an FSDP block's gradients), each device keeping its 1/world."""
    import torch
    import torch.distributed as dist
    shard = max(1, size // 4 // world)
    dist.reduce_scatter_single(torch.empty(shard, device=where), torch.ones(shard * world, device=where))


def _line(times: dict[int, float]) -> Cost:
    """The latency and time per byte through two sizes' times (neither below 0: a noisy small size's time may
    exceed the large one's)."""
    (small, t_small), (large, t_large) = sorted(times.items())
    per_byte = max(0.0, (t_large - t_small) / (large - small)) if large > small else 0.0
    return Cost(max(0.0, t_small - per_byte * small), per_byte)


def _synchronize(where: str) -> None:
    if where.startswith("cuda"):
        import torch
        torch.cuda.synchronize(where)
