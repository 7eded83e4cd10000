"""An FSDP rank's tensors at its step's peak, by kind, as torch's FSDPMemTracker counts them.

What a sharded model holds between steps (its shards, their gradients, the
optimizer's state) is counted by engine.tensor_memory like any model's; what
decides FSDP's peak is transient: the parameters gathered for a block's forward
and backward, the all-gather's output and the reduce-scatter's input buffers, the
unsharded gradients before they are scattered, and backward's temporaries. torch's
``FSDPMemTracker`` (torch.distributed._tools.fsdp2_mem_tracker) follows each of
them through FSDP's own pre/post forward and backward and a dispatch mode over
every op; it costs a Python call per op, so it tracks one warm-up step only
(engine.tensor_memory.TensorMeter decides which).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

if TYPE_CHECKING:
    from engine.devices import Device


class FsdpStepPeak:
    """A context around one step; ``by_kind`` then gives the bytes live at its peak on the rank's device."""

    def __init__(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, device: "Device"):
        self._tracker = FSDPMemTracker(module, optimizer)
        self._device = device

    def track_inputs(self, tensors) -> None:
        """The step's batch, counted as "Inputs": a rank holds the whole batch it takes its chunk of, and a
        chunk made inside the step is a view of that storage, which would otherwise count as an activation."""
        self._tracker.track_inputs(tuple(tensors))

    def __enter__(self) -> "FsdpStepPeak":
        self._tracker.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._tracker.__exit__(*exc)

    def by_kind(self) -> dict[str, int]:
        """{"Sharded Param": bytes, "Unsharded Param": ..., "All Gather": ..., ...}: torch's names of the kinds
        with any bytes at the peak, "Total" left out (their sum)."""
        snapshot = self._tracker.get_tracker_snapshot("peak").get(torch.device(self._device.torch_device), {})
        return {getattr(kind, "value", kind): size for kind, size in snapshot.items()
                if kind != "Total" and size}
