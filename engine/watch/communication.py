"""A watched script's communication, timed where torch makes it (installed by engine/watch/instruments.py).

- ``torch.distributed``'s collectives (``COLLECTIVES``: FSDP2's all-gathers and reduce-scatters, a
  script's own all-reduce), from the call to the completion (an ``async_op`` one's Work future), the
  outermost call only (an object collective calls others); a barrier is ``wait``.
- Tensor parallel's functional collectives (``torch.distributed._functional_collectives``, which DTensor
  calls for its redistributions): from the call to the wait for its result (``wait_tensor``, at the
  result's first use, which is when the script's next operation needs it).
- DistributedDataParallel's all-reduce, overlapping the backward it runs under. On a GPU, through a comm hook
  set at each DDP module's first forward (the reducer's own arithmetic: times 1/world, then summed), from each
  bucket's launch to its completion. On a CPU, from DDP's own timer (its runtime logging, sampled every step):
  from the first bucket's launch to the end of the reducer's wait for the last, read at each backward's end (about
  10 µs a step): no Python runs on gloo's thread, where a hook's future completes and its callback must take the
  GIL (bench/ddp_hooks_in_process.py measures the hooks on DDP ranks; the two cost the same within its noise).
- A pipeline stage's waits for its peer's activation or gradient (torch's pipelining schedules wait on
  their sends and receives in one module-level function, wrapped here as the engine's own pipeline wraps
  it: engine/strategies/pipeline/scheduled_stages.py), as ``wait``.

Each is timed by the instruments' clock (engine/watch/clocks.py): on a GPU, a mark is an event on the
stream current where it is taken; a future's callback runs with a stream that waits for the collective
current, so its mark comes after the collective's work. Each function takes the instruments
(engine/watch/instruments.py: their ``clock``, ``add``, ``collective_returned``, ``waited``, ``calling``),
patches one thing and returns what undoes it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

COLLECTIVES = ("all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_single",
               "all_gather_coalesced", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor",
               "reduce_scatter_single", "broadcast", "broadcast_object_list", "reduce", "all_to_all",
               "all_to_all_single", "gather", "scatter", "barrier", "monitored_barrier")
"""The ``torch.distributed`` functions timed as communication (the barriers as wait)."""

FUNCTIONAL_COLLECTIVES = ("broadcast", "all_reduce", "all_reduce_coalesced", "all_gather_single",
                          "all_gather_single_autograd", "all_gather_tensor", "all_gather_tensor_autograd",
                          "all_gather_single_coalesced", "all_gather_into_tensor_coalesced", "all_gather_inplace",
                          "reduce_scatter_single", "reduce_scatter_single_autograd", "reduce_scatter_tensor",
                          "reduce_scatter_tensor_autograd", "reduce_scatter_single_coalesced",
                          "reduce_scatter_tensor_coalesced", "all_to_all_single", "all_to_all_single_autograd",
                          "permute_tensor")
"""``torch.distributed._functional_collectives``' collectives (torch 2.14), timed as communication."""

AWAITED_AT_MOST = 1024   # functional collectives whose result is not waited for yet (one never used is let go)


def outermost(instruments, original: Callable, timed: Callable) -> Callable:
    """``timed`` for the outermost call on a thread; the calls it makes itself go to ``original`` untimed."""
    import torch
    calling = instruments.calling

    @functools.wraps(original)
    def call(*args, **kwargs):
        # inside torch.compile's tracing: the original, as the script would trace it (no graph break of ours)
        if torch.compiler.is_compiling() or getattr(calling, "depth", 0):
            return original(*args, **kwargs)
        calling.depth = 1
        try:
            return timed(*args, **kwargs)
        finally:
            calling.depth = 0
    return call


def patch(owner, name: str, replacement: Callable) -> Callable[[], None]:
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    return functools.partial(setattr, owner, name, original)


def time_collectives(instruments) -> list[Callable[[], None]]:
    import torch.distributed as dist
    undo = []
    for name in COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None:
            continue
        kind = "wait" if "barrier" in name else "communication"

        def timed(*args, _original=original, _kind=kind, **kwargs):
            clock = instruments.clock
            t0 = clock.now()
            result = _original(*args, **kwargs)
            if isinstance(result, dist.Work):
                try:
                    result.get_future().then(lambda future: instruments.add(_kind, t0, instruments.clock.now()))
                    return result
                except RuntimeError:   # a backend without futures: timed to its return
                    pass
            instruments.collective_returned(_kind, t0, clock.now())
            return result
        undo.append(patch(dist, name, outermost(instruments, original, timed)))
    return undo


def time_functional_collectives(instruments) -> list[Callable[[], None]]:
    """From the call to the wait for its result: DTensor hands the result on as an AsyncCollectiveTensor,
    which waits (``wait_tensor``, a module-level name there) where it is first used. A result is known
    by its storage (a view of it, which DTensor takes before the wait, shares it)."""
    import torch
    from torch.distributed import _functional_collectives as funcol
    awaited: dict[int, object] = {}   # storage address -> the call's mark

    def storage_of(tensor) -> int | None:
        try:
            return tensor.untyped_storage().data_ptr()
        except (RuntimeError, AttributeError, NotImplementedError):   # a fake or symbolic tensor (tracing)
            return None

    undo = []
    for name in FUNCTIONAL_COLLECTIVES:
        original = getattr(funcol, name, None)
        if original is None:
            continue

        def timed(*args, _original=original, **kwargs):
            t0 = instruments.clock.now()
            result = _original(*args, **kwargs)
            last = result[-1] if isinstance(result, (list, tuple)) and result else result
            if isinstance(last, funcol.AsyncCollectiveTensor) and not last.completed:
                key = storage_of(last.elem)
                if key is not None:
                    if len(awaited) >= AWAITED_AT_MOST:
                        awaited.clear()
                    awaited[key] = t0
                    return result
            instruments.collective_returned("communication", t0, instruments.clock.now())   # waited for already
            return result
        undo.append(patch(funcol, name, outermost(instruments, original, timed)))
    original_wait = funcol.wait_tensor

    def timed_wait(tensor):
        out = original_wait(tensor)
        if awaited and not torch.compiler.is_compiling():
            t0 = awaited.pop(storage_of(tensor), None)
            if t0 is not None:
                instruments.collective_returned("communication", t0, instruments.clock.now())
        return out
    undo.append(patch(funcol, "wait_tensor", functools.wraps(original_wait)(timed_wait)))
    return undo


def time_ddp_buckets(instruments) -> list[Callable[[], None]]:
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import all_reduce  # untimed: torch.distributed's name is wrapped
    from torch.nn.parallel import DistributedDataParallel
    original_init = DistributedDataParallel.__init__

    def timed_allreduce(process_group, bucket):
        group = process_group if process_group is not None else dist.group.WORLD
        tensor = bucket.buffer()
        tensor.mul_(1.0 / group.size())   # as DDP scales a bucket without a hook: the same arithmetic
        t0 = instruments.clock.now()

        def done(future):
            instruments.add("communication", t0, instruments.clock.now())
            return future.value()[0]
        return all_reduce(tensor, group=group, async_op=True).get_future().then(done)

    def time_buckets(ddp, args) -> None:
        """At the module's first forward, after the script had its chance to set a comm hook of its own
        (fp16 compression, PowerSGD; DDP takes one): the timed all-reduce only where none is set."""
        ddp._splitscope_first_call.remove()
        if getattr(ddp, "_comm_hooks", None):
            return
        try:
            ddp.register_comm_hook(ddp.process_group, timed_allreduce)
        except (RuntimeError, AssertionError):   # a built-in hook (mixed precision) took the place: untimed
            pass

    on_host = HostReducers(instruments)

    @functools.wraps(original_init)
    def init(ddp, *args, **kwargs):
        original_init(ddp, *args, **kwargs)
        if getattr(ddp, "logger", None) is None:   # every parameter's all-reduce delayed: no reducer to time
            return
        if getattr(ddp, "device_type", None) == "cpu":
            on_host.add(ddp)
        else:
            ddp._splitscope_first_call = ddp.register_forward_pre_hook(time_buckets)
    instruments.after_backward.append(on_host.read)
    return [patch(DistributedDataParallel, "__init__", init), on_host.release]


class HostReducers:
    """The DDP modules on a CPU, their all-reduce timed by DDP's own timer (``Reducer``'s runtime stats, which
    its ``Logger`` sets at a forward for the iteration before; asked here at the backward's end, when the reducer
    has waited for its last bucket). The timer's marks are c10's clock's nanoseconds (``_timer_offset``). A module
    with a comm hook of the script's own is left to it: the hook's collectives are timed as ``torch.distributed``'s."""
    DEFAULT_SAMPLE_RATE = 100   # DDP's (kDDPRuntimeLoggingSampleRate), given back when the watch ends

    def __init__(self, instruments):
        import weakref
        self._instruments = instruments
        # each module -> its last all-reduce's start read (a backward under no_sync reads the same one again)
        self._last_start: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def add(self, ddp) -> None:
        ddp._set_ddp_runtime_logging_sample_rate(1)
        self._last_start[ddp] = 0

    def read(self) -> None:
        """Never raises into the script's backward (engine/watch/wrappers.py calls it in a ``finally``): a module
        whose timer cannot be read goes untimed."""
        if self._instruments.clock.deferred:   # a GPU's clock: its marks are events, not the host's seconds
            return
        for ddp in list(self._last_start):
            try:
                self._read_one(ddp)
            except Exception:  # noqa: BLE001 - the script's step matters more than one all-reduce's interval
                self._last_start.pop(ddp, None)

    def _read_one(self, ddp) -> None:
        if getattr(ddp, "_comm_hooks", None):   # the script's own hook: its collectives are timed as they run
            return
        logger = ddp.logger
        logger.set_runtime_stats_and_log()
        marks = logger._get_ddp_logging_data().ints_map
        start, end = marks.get("backward_comm_time_start", 0), marks.get("backward_comm_time_end", 0)
        if start <= 0 or end < start or self._last_start.get(ddp) == start:
            return
        self._last_start[ddp] = start
        offset = _timer_offset(self._instruments.clock)
        self._instruments.add("communication", start / 1e9 + offset, end / 1e9 + offset)

    def release(self) -> None:
        for ddp in list(self._last_start):
            if getattr(ddp, "logger", None) is not None:
                ddp._set_ddp_runtime_logging_sample_rate(self.DEFAULT_SAMPLE_RATE)
        self._last_start.clear()


def _timer_offset(clock) -> float:
    """DDP's timer clock (c10's getTime: the system clock on Linux, the steady clock on macOS and Windows) to the
    instruments' marks, in seconds: the timer's clock read between two of the instruments', the closest of three
    tries (a preemption between two reads would shift every interval by it)."""
    import sys
    import time
    timer_ns = time.time_ns if sys.platform.startswith("linux") else time.monotonic_ns
    best = None
    for _ in range(3):
        before = clock.now()
        timer = timer_ns() / 1e9
        after = clock.now()
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) / 2 - timer)
    return best[1]


def time_peer_waits(instruments) -> list[Callable[[], None]]:
    from torch.distributed.pipelining import schedules
    original = schedules._wait_batch_p2p

    def timed_wait(work):
        t0 = instruments.clock.now()
        try:
            return original(work)
        finally:
            instruments.waited(t0, instruments.clock.now())
    return [patch(schedules, "_wait_batch_p2p", timed_wait)]
