"""FLOPs per device in one step: torch's FLOP formulas, each operation credited to the device that ran it.

torch's ``FlopCounterMode`` adds up the formulas of ``torch.utils.flop_counter.flop_registry``
(a matrix multiply of m x k by k x n is 2mkn; a convolution, attention, their backwards)
for what the thread that entered it dispatches. A run's work is spread wider than that:
the in-process strategies drive several devices from several threads
(engine/strategies/device_threads.py), and CPU virtual devices are cores of one torch
"cpu" device, so a tensor's device cannot say which of them did the work. So each
operation is credited to, in order:

1. the device of the span its thread is timing (``engine.measure.timing.span_device``): every
   strategy times each device's forward, backward and optimizer in such a span;
2. else the GPU its output lies on (autograd runs a GPU's backward on threads of its own,
   outside any span);
3. else the rank's own device (a process with one device times some work with marks, not
   spans: ddp's backward).

Under tensor parallelism an operation on DTensors is counted on its shards' shapes: the
device's own part of the work.

The count is the formulas' (dense, naive: "model FLOPs" as MFU means them), not what a
kernel executes; operations without a formula (element-wise, normalization) add nothing.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager, nullcontext

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import flop_registry

from engine.measure.timing import span_device

try:
    from torch.distributed.tensor import DTensor
except ImportError:   # a torch built without distributed
    DTensor = None

_counting = threading.local()   # per thread: the DeviceFlops it is counting for, while it does


aten = torch.ops.aten
# torch's registry has the CUDA attention kernels' formulas; a CPU's are the same operation under another name.
FORMULAS = {**flop_registry, **{cpu: flop_registry[gpu] for cpu, gpu in (
    (getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None), aten._scaled_dot_product_flash_attention),
    (getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None),
     getattr(aten, "_scaled_dot_product_flash_attention_backward", None))) if cpu is not None and gpu in flop_registry}}


class DeviceFlops:
    """The FLOPs of what runs while ``counting()`` is entered, by device name. Thread-safe."""

    def __init__(self, own_device: str, gpu_names: dict[int, str] | None = None):
        self.own_device = own_device
        self.gpu_names = dict(gpu_names or {})   # CUDA ordinal -> the engine's device name
        self.by_device: dict[str, int] = {}
        self.by_dtype: dict[str, int] = {}    # "float32", "bfloat16", ...: the dtype each operation's output has
        self.uncounted: dict[str, str] = {}   # operation -> why its formula failed (counted as 0), once each
        self._lock = threading.Lock()

    @contextmanager
    def counting(self):
        """Count on this thread (and on the device threads its jobs go to: ``carried``)."""
        outer = getattr(_counting, "flops", None)
        _counting.flops = self
        try:
            with _CreditingMode(self):
                yield self
        finally:
            _counting.flops = outer

    def credit(self, count: int, output) -> None:
        device = span_device() or self._gpu_of(output) or self.own_device
        tensor = next(_tensors(output), None)
        dtype = str(tensor.dtype).removeprefix("torch.") if tensor is not None else "unknown"
        with self._lock:
            self.by_device[device] = self.by_device.get(device, 0) + int(count)
            self.by_dtype[dtype] = self.by_dtype.get(dtype, 0) + int(count)

    def main_dtype(self) -> str | None:
        """The dtype most of the counted FLOPs ran in (a script's own: autocast's, or its parameters')."""
        return max(self.by_dtype, key=self.by_dtype.get) if self.by_dtype else None

    def _gpu_of(self, output) -> str | None:
        tensor = next((t for t in _tensors(output)), None)
        if tensor is None or tensor.device.type != "cuda":
            return None
        return self.gpu_names.get(tensor.device.index)


def carried():
    """What a job handed to another thread runs under so that its work is counted too: the submitting
    thread's counter, or nothing when it counts none (engine/strategies/device_threads.py)."""
    flops = getattr(_counting, "flops", None)
    return flops.counting if flops is not None else nullcontext


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


class _CreditingMode(TorchDispatchMode):
    """FlopCounterMode's dispatch rule (torch/utils/flop_counter.py), crediting each count to a device. The
    count never fails the step it watches: an operation whose formula cannot read its arguments counts 0 and is
    named in ``DeviceFlops.uncounted``."""
    supports_higher_order_operators = True

    def __init__(self, flops: DeviceFlops):
        super().__init__()
        self.flops = flops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.HigherOrderOperator):   # flex attention and the like: not counted
            self.flops.uncounted.setdefault(str(func), "a higher-order operator, without a formula here")
            return func(*args, **kwargs)
        packet = func._overloadpacket
        if packet not in FORMULAS and func is not torch.ops.prim.device.default:
            # As FlopCounterMode: an operation without a formula may decompose into some with one.
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        if packet in FORMULAS:
            try:
                local_args, local_kwargs, local_out = tree_map(_shard, (args, kwargs, out))
                count = FORMULAS[packet](*local_args, **local_kwargs, out_val=local_out)
            except Exception as exc:  # noqa: BLE001  (a shard's shapes a formula cannot take: counted as 0)
                self.flops.uncounted.setdefault(str(packet), f"{type(exc).__name__}: {exc}")
            else:
                self.flops.credit(count, local_out)
        return out


def _shard(value):
    """A DTensor's own shard, else the value: under tensor parallelism the mode sees each operation on the
    whole (global) tensors, and a device's work is its shard's."""
    return value._local_tensor if DTensor is not None and isinstance(value, DTensor) else value
