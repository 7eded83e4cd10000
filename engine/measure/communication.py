"""What each rank's collectives and transfers moved in a step: calls, bytes and time, per device and operation.

The strategies that shard (fsdp, tensor-parallel, fsdp+tp) reach their collectives
through torch's dispatcher: FSDP2's all-gathers and reduce-scatters are ``c10d``
ops, DTensor's redistributions ``_c10d_functional`` ops. ``CollectiveMeter``, a
TorchDispatchMode entered around a step, sees each one as it is called, times it
on the calling device (the interval "communication" on the timeline) and counts
its bytes. DDP's all-reduce runs in its C++ reducer, outside Python's dispatch: its
comm hook counts each bucket instead (engine.strategies.ddp_executor).

Bytes are each operation's payload, the size of the whole buffer it makes agree,
as nccl-tests reports ``size``: an all-gather's output, a reduce-scatter's input,
an all-reduce's tensor. That is what the model's size predicts (ddp all-reduces
every gradient once a step); the bytes a ring sends per device are
2(n-1)/n of it for an all-reduce and (n-1)/n for the other two.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.devices import Device
    from engine.measure.timing import StepTimer

# Operation names, in the order figures and tables list them.
OPERATIONS = ("all-gather", "reduce-scatter", "all-reduce", "broadcast", "all-to-all", "reduce", "gather", "scatter",
              "send", "recv", "send/recv")
POINT_TO_POINT = ("send", "recv", "send/recv")
# Every op of torch 2.14's c10d and _c10d_functional libraries that moves data, and what it is (the rest, a
# barrier or a wait, moves none). "_c10d_functional_autograd" ops call these, and are seen through them.
_OPERATION_OF = {
    **dict.fromkeys(("c10d::_allgather_base_", "c10d::allgather_", "c10d::allgather_coalesced_",
                     "c10d::allgather_into_tensor_coalesced_", "_c10d_functional::all_gather_into_tensor",
                     "_c10d_functional::all_gather_into_tensor_coalesced",
                     "_c10d_functional::all_gather_into_tensor_out"), "all-gather"),
    **dict.fromkeys(("c10d::_reduce_scatter_base_", "c10d::reduce_scatter_", "c10d::reduce_scatter_tensor_coalesced_",
                     "_c10d_functional::reduce_scatter_tensor", "_c10d_functional::reduce_scatter_tensor_coalesced",
                     "_c10d_functional::reduce_scatter_tensor_out"), "reduce-scatter"),
    **dict.fromkeys(("c10d::allreduce_", "c10d::allreduce_coalesced_", "_c10d_functional::all_reduce",
                     "_c10d_functional::all_reduce_", "_c10d_functional::all_reduce_coalesced",
                     "_c10d_functional::all_reduce_coalesced_"), "all-reduce"),
    **dict.fromkeys(("c10d::broadcast_", "_c10d_functional::broadcast", "_c10d_functional::broadcast_"), "broadcast"),
    **dict.fromkeys(("c10d::alltoall_", "c10d::alltoall_base_", "_c10d_functional::all_to_all_single"), "all-to-all"),
    "c10d::reduce_": "reduce",
    **dict.fromkeys(("c10d::gather_", "c10d::gather_into_tensor_"), "gather"),
    "c10d::scatter_": "scatter",
    **dict.fromkeys(("c10d::send", "_c10d_functional::isend"), "send"),
    **dict.fromkeys(("c10d::recv_", "c10d::recv_any_source_", "_c10d_functional::irecv"), "recv"),
    "_c10d_functional::batch_p2p_ops": "send/recv",
}


def operation_of(op_name: str) -> str | None:
    """The operation a dispatcher op performs ("c10d::_allgather_base_" is an all-gather); None for what moves
    no data (a barrier, a wait)."""
    return _OPERATION_OF.get(op_name)


class CommLedger:
    """One rank's collectives of the current step: (device, operation, bytes, start mark, end mark)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._records: list[tuple[str, str, int, object, object]] = []
        self._held: list[tuple[str, str, int, object, object]] = []
        self._hold = False

    def record(self, device: Device, operation: str, nbytes: int, start, end) -> None:
        """Marks from ``StepTimer.mark``: perf_counter seconds, or CUDA events (timed once the step ended);
        ``end`` None: counted, not timed (a send or receive)."""
        with self._lock:
            self._records.append((device.name, operation, int(nbytes), start, end))

    def hold(self) -> None:
        """What was recorded since the last ``take`` repeats, untimed, in every later one: a pipeline's sends
        and receives, counted on one step (a dispatch mode slows the step it watches), repeat every step."""
        with self._lock:
            self._hold = True

    def take(self) -> dict[str, dict[str, list]]:
        """{device: {operation: [calls, bytes, seconds or None]}} since the last call; after
        ``StepTimer.end_step``, which waits for the GPUs, so every CUDA event has fired."""
        with self._lock:
            records, self._records = self._records, []
            if self._hold:
                self._held, self._hold = [(d, op, n, None, None) for d, op, n, _, _ in records], False
            else:
                records += self._held
        out: dict[str, dict[str, list]] = {}
        for device, operation, nbytes, start, end in records:
            entry = out.setdefault(device, {}).setdefault(operation, [0, 0, None])
            entry[0] += 1
            entry[1] += nbytes
            if end is not None:
                seconds = end - start if isinstance(start, float) else max(0.0, start.elapsed_time(end)) / 1000.0
                entry[2] = (entry[2] or 0.0) + seconds
        return out


def payload_bytes(args, result) -> int:
    """The operation's payload: the largest of its arguments and its result, each a tensor or a (nested) list
    of them. An all-gather takes (output, input shard): its output; a reduce-scatter (output shard, input):
    its input; an all-reduce its tensors."""
    import torch

    def size(value) -> int:
        if isinstance(value, torch.Tensor):
            return value.numel() * value.element_size()
        if isinstance(value, (list, tuple)):
            return sum(size(v) for v in value)
        return 0
    return max([size(a) for a in args] + [size(result)])


def collective_meter(timer: StepTimer, ledger: CommLedger, device: Device):
    """A TorchDispatchMode that times and counts every collective called inside it on ``device``.

    On a CPU device each collective is waited for as it is called (FSDP2 waits for its own at once
    there, and a functional collective's result is what DTensor's next op reads): the time is the
    calling thread's, cut out of the forward or backward around it (``StepTimer.add_blocking``), and a
    rank that arrived first shows the rest as "wait" (engine.record.step_merger). On a GPU a collective that hands
    back a Work ends when its future completes, as ddp's hook times it, and may overlap compute. Sends
    and receives are counted, neither waited for nor timed (engine.strategies.pipeline.scheduled_stages times the
    waits for them as "wait").
    """
    import torch
    import torch.distributed as dist
    from torch.utils._python_dispatch import TorchDispatchMode
    wait_tensor = torch.ops._c10d_functional.wait_tensor

    class CollectiveMeter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            operation = operation_of(func._schema.name)
            if operation is None:
                return func(*args, **kwargs)
            start = timer.mark(device)
            result = func(*args, **kwargs)
            nbytes = payload_bytes(args, result)
            # Inside a dispatch mode a c10d op hands its Work back boxed, as a ScriptObject.
            work = next((dist.Work.unbox(r) for r in (result if isinstance(result, tuple) else (result,))
                         if isinstance(r, torch.ScriptObject)), None)

            def finished(end) -> None:
                ledger.record(device, operation, nbytes, start, end)
                if device.kind == "cuda":
                    timer.between(device, "communication", start, end)
                else:
                    timer.add_blocking(device.name, "communication", start, end)

            if operation in POINT_TO_POINT:
                # A pipeline posts its receives ahead and waits for them where its schedule needs them (timed
                # there as "wait"): counted here, never waited for.
                ledger.record(device, operation, nbytes, start, None)
                return result
            if device.kind != "cuda" and work is not None:
                work.wait()  # the caller would wait for it next: on one core nothing else runs meanwhile
                work = None
            if work is not None:
                def done(future):
                    finished(timer.mark(device))
                    return future.value()
                work.get_future().then(done)
            else:
                if func.namespace == "_c10d_functional":
                    result = wait_tensor(result) if isinstance(result, torch.Tensor) else [wait_tensor(r) for r in result]
                finished(timer.mark(device))
            return result

    return CollectiveMeter()
