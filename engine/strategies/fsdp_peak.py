"""An FSDP rank's tensors at its step's peak, by kind, as torch's FSDPMemTracker counts them.

What a sharded model holds between steps (its shards, their gradients, the
optimizer's state) is counted by engine.measure.tensor_memory like any model's; what
decides FSDP's peak is transient: the parameters gathered for a block's forward
and backward, the all-gather's output and the reduce-scatter's input buffers, the
unsharded gradients before they are scattered, and backward's temporaries. torch's
``FSDPMemTracker`` (torch.distributed._tools.fsdp2_mem_tracker) follows each of
them through FSDP's own pre/post forward and backward and a dispatch mode over
every op; it costs a Python call per op, so it tracks one warm-up step only
(engine.measure.tensor_memory.TensorMeter decides which).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from engine.devices import Device

_TOOLS = "torch.distributed._tools"
_LOADING = threading.RLock()


def _fsdp_mem_tracker() -> type:
    """torch's FSDPMemTracker class, without running its package's ``__init__`` first: that imports torch's
    runtime and SAC estimators and through them inductor, dynamo and triton (3.3 s here, each rank, for a
    tracker that uses none of them). The package is put in place as a module whose attributes load the real
    ``__init__`` on first use, so whoever imports it later in the process gets all of it."""
    with _LOADING:
        if _TOOLS not in sys.modules:
            spec = importlib.util.find_spec(_TOOLS)
            package = importlib.util.module_from_spec(spec)   # __file__, __path__, __spec__: nothing run yet

            def load_whole(name: str):
                if name.startswith("__"):   # a probe (inspect, pickle, hasattr of a dunder) loads nothing
                    raise AttributeError(name)
                with _LOADING:
                    if "__getattr__" in vars(package):
                        del package.__getattr__      # once: the real __init__ defines what it exports
                        try:
                            spec.loader.exec_module(package)
                        except BaseException:
                            package.__getattr__ = load_whole   # asked again, it tries again
                            raise
                return getattr(package, name)
            package.__getattr__ = load_whole
            sys.modules[_TOOLS] = package
            torch.distributed._tools = package
    return importlib.import_module(f"{_TOOLS}.fsdp2_mem_tracker").FSDPMemTracker


class FsdpStepPeak:
    """A context around one step; ``by_kind`` then gives the bytes live at its peak on the rank's device."""

    def __init__(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, device: Device):
        self._tracker = _fsdp_mem_tracker()(module, optimizer)
        self._device = device

    def track_inputs(self, tensors) -> None:
        """The step's batch, counted as "Inputs": a rank holds the whole batch it takes its chunk of, and a
        chunk made inside the step is a view of that storage, which would otherwise count as an activation."""
        self._tracker.track_inputs(tuple(tensors))

    def __enter__(self) -> FsdpStepPeak:
        self._tracker.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._tracker.__exit__(*exc)

    def by_kind(self) -> dict[str, int]:
        """{"Sharded Param": bytes, "Unsharded Param": ..., "All Gather": ..., ...}: torch's names of the kinds
        with any bytes at the peak, "Total" left out (their sum)."""
        snapshot = self._tracker.get_tracker_snapshot("peak").get(torch.device(self._device.torch_device))
        if not snapshot:
            return {}   # nothing tracked on this device: no step peak rather than one of zeros
        return {getattr(kind, "value", kind): size for kind, size in snapshot.items()
                if kind != "Total" and size}
