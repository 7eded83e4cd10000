"""What a rank knows about its run (RankContext), and the Executor every strategy builds on a rank.

A strategy (engine/strategies/strategy.py) says how many processes a run needs
and what it refuses; on each rank its ``build`` returns an Executor from here:
placement and wrapping of the model, the forward, backward and optimizer step
of one batch. Executors import torch; this module does not at import time (the
worker, which only supervises, imports the registry). The training loop
(engine.run.loop) owns timing, events and stop requests.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.config import ExperimentConfig
from engine.devices import Device
from engine.measure.communication import CommLedger
from engine.measure.tensor_memory import Placement
from engine.measure.timing import StepTimer
from engine.problems import Problem

if TYPE_CHECKING:
    import torch

    from engine.models.spec import ModelSpec


def replica_device_problems(strategy: str, devices, one_per_gpu: str) -> list[Problem]:
    """A replica on each device (data-parallel, ddp): one kind of device, and no GPU twice."""
    if len({d.kind for d in devices}) > 1:
        return [Problem("devices", f"{strategy} needs devices of one kind (all cpu or all cuda), "
                                   f"got {', '.join(d.name for d in devices)}")]
    cuda = [(d.node, d.index) for d in devices if d.kind == "cuda"]  # cuda:0 of two nodes are two GPUs
    if len(set(cuda)) != len(cuda):
        return [Problem("devices", f"{strategy} needs distinct GPUs, {one_per_gpu}")]
    return []


@dataclass
class RankContext:
    config: ExperimentConfig
    rank: int
    world_size: int
    devices: list[Device]            # every device of the run, in order
    split: tuple[int, ...] | None    # first block of each later stage (staged strategies)
    spec: ModelSpec
    timer: StepTimer
    comm: CommLedger = field(default_factory=CommLedger)   # the step's collectives (engine.measure.communication)


@dataclass
class StepResult:
    loss_part: float | None          # this rank's share of the global batch's mean loss
    samples: int                     # samples this rank consumed from the global batch
    batch_split: list[int] | None = None  # per-device batch sizes, reported by one rank


class Executor(ABC):
    def place_batch(self, inputs: torch.Tensor, targets: torch.Tensor):
        """Put a host batch where ``step`` reads it (the GPU of the first stage, ...), timing any copy as
        "transfer"; returns what ``step`` takes. Called before the first step for prepared batches, inside
        the step for batches drawn there (engine.run.feed)."""
        return inputs, targets

    def input_rows(self, batch_size: int) -> range:
        """The rows of a global batch whose inputs this rank's step reads: a DataLoader on this rank decodes
        only these (engine.run.loader), as a DistributedSampler gives each replica its own samples."""
        return range(batch_size)

    @abstractmethod
    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        """One optimizer update on the global batch (each rank takes its part)."""

    @abstractmethod
    def reported_parameters(self) -> list | None:
        """The parameters this rank reports at the end (their norm, and how far training moved them);
        None when another rank reports the same ones (ddp's replicas)."""

    def schedule_plan(self) -> list[list[str]] | None:
        """The schedule's own action list, per rank, tick by tick ("0F1": stage 0's forward of micro-batch 1;
        "" an idle tick), where a pipelining schedule drives the step; None otherwise."""
        return None

    def placements(self) -> list[Placement]:
        """The modules this rank placed on each device, with the optimizer that updates them: what the
        run's tensor memory per device is measured from (engine.measure.tensor_memory)."""
        return []

    def step_peak(self):
        """A context that tracks one step's tensors at their peak, by kind (engine/strategies/fsdp_peak.py),
        where the strategy's peak is more than what it holds between steps; None elsewhere."""
        return None

    def split_backward_extra_s(self):
        """After the last step: how much longer a micro-batch's backward takes on this rank's stages split into
        input and weight gradient than whole (a SplitCost, engine/strategies/pipeline/split_backward_probe.py), and
        why it was not measured where it could not be; (None, None) where the strategy runs no pipeline schedule of
        its own."""
        return None, None

    def two_way_extra_s(self):
        """After the last step (and the split backward's probe): how much longer two ranks take sending two
        hand-overs to each other at once than one way (seconds, engine/strategies/pipeline/exchange_probe.py), and
        why it was not measured; (None, None) where the strategy runs no pipeline schedule of its own."""
        return None, None

    def param_sq(self) -> float | None:
        """Sum of squares of the reported parameters."""
        params = self.reported_parameters()
        return None if params is None else params_sq(params)

    def close(self) -> None:  # noqa: B027  (no-op by default: only executors that hold threads override it)
        pass


def place_on(timer: StepTimer, device: Device, *tensors):
    """The tensors copied to ``device``, timed there as "transfer" (a no-op for CPU devices)."""
    if device.kind != "cuda":
        return tensors
    with timer.span(device, "transfer"):   # from page-locked memory (a loader's --pin-memory) asynchronously
        return tuple(t.to(device.torch_device, non_blocking=t.is_pinned()) for t in tensors)


def replica_rows(batch_size: int, replicas: int, index: int) -> range:
    """The rows of a batch replica ``index`` takes: torch.chunk's (ceil(batch / replicas) each, as DataParallel
    would scatter it; a small last batch leaves later replicas short or without samples)."""
    size = -(-batch_size // replicas)
    return range(min(batch_size, index * size), min(batch_size, (index + 1) * size))


def replica_batch(inputs, targets, replicas: int, index: int):
    """Replica ``index``'s part of the batch (``replica_rows``: an empty slice for one without samples), and
    every replica's size."""
    total = len(inputs)
    sizes = [len(replica_rows(total, replicas, i)) for i in range(replicas)]
    rows = replica_rows(total, replicas, index)
    return inputs[rows.start:rows.stop], targets[rows.start:rows.stop], sizes


def replica_loss(loss_fn, out, targets, total: int, replicas: int):
    """(this replica's loss, the loss to differentiate): weighted by its share of the batch, so the gradients'
    mean over the replicas (DDP's all-reduce, FSDP's reduce-scatter) is the whole batch's mean-loss gradient,
    even when chunks are uneven or empty."""
    mine = int(targets.shape[0])
    if not mine:
        local = out.sum() * 0.0   # no samples: a zero that still joins the gradients' collectives
        return local, local
    local = loss_fn(out, targets)
    return local, local * (mine * replicas / total)


def stage_bounds(split: tuple[int, ...], n_blocks: int) -> list[tuple[int, int]]:
    """[start, stop) block ranges of each stage."""
    edges = (0, *split, n_blocks)
    return list(zip(edges[:-1], edges[1:], strict=False))


def params_sq(params) -> float:
    import torch
    with torch.no_grad():
        return float(sum(p.detach().double().pow(2).sum() for p in params))


class ParameterChange:
    """How far training moved the reported parameters: the sum of squares of (final - initial).

    The parameters' own norm is dominated by their initial values (two steps move it by
    about 1e-5 of itself), so a missing or doubled update hides under a 1e-4 comparison;
    the change is what training did, and a wrong update changes it by its whole size.
    """

    def __init__(self, executor: Executor):
        self._executor = executor
        params = executor.reported_parameters()
        self._initial = None if params is None else [p.detach().clone() for p in params]

    def sq(self) -> float | None:
        """Asks the executor again: a sharded parameter's local shard is a new view each time it is asked."""
        if self._initial is None:
            return None
        import torch
        with torch.no_grad():
            return float(sum((p.detach().double() - p0.double()).pow(2).sum()
                             for p, p0 in zip(self._executor.reported_parameters(), self._initial, strict=True)))
