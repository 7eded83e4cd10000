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
kernel executes. ``FORMULAS`` is torch's registry with the project's own formulas over it
(engine/measure/flop_formulas.py: the recurrent layers' kernels and ``_addmm_activation``, which
torch has none for, and ``convolution_backward``, whose grouped weight gradient torch counts
``groups`` times over).

An operation without a formula adds nothing. By the convention of model FLOPs most have none, and are
left at that: element-wise ones, data movement (views, reshapes, copies, fills, creation, random draws),
indexing (embedding, gather, scatter), reductions, normalization, softmax, losses, dropout, pooling and
resampling, optimizer updates. The rule (``flop_formulas.has_model_flops``): torch's own tags on any
overload of the op (``pointwise``, ``reduction``, ``view_copy``, ``inplace_view``), a view, an operator
namespace that only moves or observes (``prim``, ``profiler``, ``c10d``...), else a whole word of the
op's name in a short list of those families (``native_batch_norm_backward``: "norm"). Any other op
without a formula (linear algebra, an FFT, a custom op, a kernel torch added later) is a gap in the
count, not a zero: its host time and calls are recorded in ``DeviceFlops.unformulated`` /
``unformulated_calls`` beside ``counted_seconds``, the host time of all operations seen, so that a
caller can say what share of the step went uncounted. Only operations on CPU tensors are timed: a
CUDA operation's host time is its launch's, not its kernel's. (A higher-order operator, flex
attention's, is named in ``uncounted`` instead, untimed.)
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager, nullcontext

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import flop_registry

from engine.measure.flop_formulas import OWN_FORMULAS, has_model_flops
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
     getattr(aten, "_scaled_dot_product_flash_attention_backward", None))) if cpu is not None and gpu in flop_registry},
    **OWN_FORMULAS}


class DeviceFlops:
    """The FLOPs of what runs while ``counting()`` is entered, by device name. Thread-safe."""

    def __init__(self, own_device: str, gpu_names: dict[int, str] | None = None):
        self.own_device = own_device
        self.gpu_names = dict(gpu_names or {})   # CUDA ordinal -> the engine's device name
        self.by_device: dict[str, int] = {}
        self.by_dtype: dict[str, int] = {}    # "float32", "bfloat16", ...: the dtype each operation's output has
        self.uncounted: dict[str, str] = {}   # operation -> why its formula failed (counted as 0), once each
        # Host seconds of the operations on CPU tensors: all of them, and those with model FLOPs but no formula
        # (op -> seconds, and calls). A CUDA operation's host time is its launch's, not its kernel's: not timed.
        self.counted_seconds = 0.0
        self.unformulated: dict[str, float] = {}
        self.unformulated_calls: dict[str, int] = {}
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

    def timed(self, func, seconds: float, has_formula: bool, output, args) -> None:
        """One operation's host time, where it means the work's: its output (else its first tensor argument)
        on a CPU. One without a formula that model FLOPs would count (``has_model_flops``) is named."""
        tensor = next(_tensors(output), None)
        if tensor is None:
            tensor = next(_tensors(args), None)
        if tensor is None or tensor.device.type != "cpu":
            return
        missing = not has_formula and has_model_flops(func)
        with self._lock:
            self.counted_seconds += seconds
            if missing:
                name = str(func._overloadpacket)
                self.unformulated[name] = self.unformulated.get(name, 0.0) + seconds
                self.unformulated_calls[name] = self.unformulated_calls.get(name, 0) + 1

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
        formula = FORMULAS.get(packet)
        if formula is None and func is not torch.ops.prim.device.default:
            # As FlopCounterMode: an operation without a formula may decompose into some with one; those are
            # timed each, so the decomposed one is not.
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        start = time.perf_counter()
        out = func(*args, **kwargs)
        self.flops.timed(func, time.perf_counter() - start, formula is not None, out, args)
        if formula is not None:
            try:
                local_args, local_kwargs, local_out = tree_map(_shard, (args, kwargs, out))
                count = formula(*local_args, **local_kwargs, out_val=local_out)
            except Exception as exc:  # noqa: BLE001  (a shard's shapes a formula cannot take: counted as 0)
                self.flops.uncounted.setdefault(str(packet), f"{type(exc).__name__}: {exc}")
            else:
                self.flops.credit(count, local_out)
        return out


def _shard(value):
    """A DTensor's own shard, else the value: under tensor parallelism the mode sees each operation on the
    whole (global) tensors, and a device's work is its shard's."""
    return value._local_tensor if DTensor is not None and isinstance(value, DTensor) else value
