"""A watched rank's steps between their end and their report (engine/watch/instruments.py): each held with its
marks until the clock can read them (a GPU's, once the GPU has passed them), then made the rank's report."""
from __future__ import annotations

from dataclasses import dataclass

from engine.record.rank_events import StepReport


@dataclass
class QueuedStep:
    """A step whose marks are not all seconds yet (a GPU's, until the GPU has passed them)."""
    step: int
    start: object
    end: object
    intervals: list              # [kind, mark, mark]; data's carries the last wait for a peer before it too
    losses: list                 # scalar tensors (on the host: a GPU's copied there as its step runs)
    declared_loss: float | None  # the loss as the script said it (watch.step), which the losses give way to
    samples: int
    flops: dict | None = None    # the counted step's: {device: FLOPs}

    def marks(self) -> list:
        return [self.start, self.end, *(m for interval in self.intervals for m in interval[1:] if m is not None)]


@dataclass(frozen=True)
class Boundary:
    """The step under way as it stood at its last optimizer step: its end mark and how much it held then."""
    end: object
    intervals: int
    samples: int
    loader_samples: int
    losses: int
    backwards: int


def as_report(queued: QueuedStep, clock, device: str) -> StepReport:
    """The step's report, its marks now seconds of ``clock``."""
    seconds = clock.seconds
    intervals = []
    for kind, t0, t1, *waited in queued.intervals:
        start, end = seconds(t0), seconds(t1)
        if kind == "data":   # less the last wait for a peer in it
            if end <= start:
                continue
            if waited and waited[0] is not None:
                start = max(start, min(seconds(waited[0]), end))
        intervals.append([kind, start, end])
    loss = queued.declared_loss
    if loss is None and queued.losses:
        loss = sum(float(x) for x in queued.losses) / len(queued.losses)
    return StepReport(queued.step, seconds(queued.start), seconds(queued.end), {device: intervals}, loss,
                      queued.samples, flops=queued.flops)


def compiled() -> str | None:
    """Why a script's step is not counted: it compiles (torch.compile; Dynamo would run its frames eagerly under
    the counter's dispatch mode, which is not what the script runs). None: it may be counted."""
    import sys
    if "torch._dynamo" not in sys.modules:
        return None
    try:
        from torch._dynamo.utils import counters
        graphs = counters["stats"]["unique_graphs"]
    except (ImportError, KeyError, AttributeError):
        return None
    return ("FLOPs not counted: the script compiles (torch.compile), and counting would run its step uncompiled"
            if graphs else None)


def on_host(loss):
    """A loss to read once its step's marks are passed (a deferred clock's): a GPU's copied to pinned host memory on
    its own stream (reading it on the GPU later would wait for everything queued since)."""
    if not loss.is_cuda:
        return loss
    import torch
    host = torch.empty((), dtype=loss.dtype, pin_memory=True)
    return host.copy_(loss, non_blocking=True)
