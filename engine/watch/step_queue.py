"""A watched rank's steps from their end to their report (engine/watch/instruments.py's ``StepEnds``): a step ended
at its end mark or where it stood at its last optimizer step, its FLOPs counted on one step, then held with its
marks until the clock can read them (a GPU's, once the GPU has passed them) and made the rank's report."""
from __future__ import annotations

import time
from dataclasses import dataclass

from engine.measure.counted_step import counted_step
from engine.wire.rank import Profiled, StepReport

QUEUED_AT_MOST = 16   # a GPU's steps whose marks it has not passed yet; past this the oldest is waited for


class WatchEnded(BaseException):
    """Raised from the optimizer's post-hook once the watch has its steps: a BaseException, so the script's own
    ``except Exception`` does not swallow it."""


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


class StepEnds:
    """How engine/watch/instruments.py's Instruments end a step (at its end mark, or where it stood at its last
    optimizer step), count one step's FLOPs, and report its steps once their marks are seconds."""

    def _end_at(self, boundary: Boundary) -> None:
        """End the step under way where it stood at ``boundary``: what came after it begins the next step."""
        with self._lock:
            later, self._intervals = self._intervals[boundary.intervals:], self._intervals[:boundary.intervals]
        later_losses, self._losses = self._losses[boundary.losses:], self._losses[:boundary.losses]
        samples, loader = self._samples - boundary.samples, self.reader.loader_samples - boundary.loader_samples
        backwards = self._backwards - boundary.backwards
        forwarded = any(interval[0] == "forward" for interval in later)
        samples_from = self._samples_from
        self._samples, self.reader.loader_samples, self._backwards = boundary.samples, boundary.loader_samples, \
            boundary.backwards
        self._end_step(boundary.end)
        with self._lock:
            self._intervals = later + self._intervals
        self._losses, self._samples, self.reader.loader_samples = later_losses, samples, loader
        self._backwards, self._forwarded, self._backward_seen = backwards, forwarded, backwards > 0
        self._samples_from = samples_from if samples else None

    def _end_step(self, end) -> None:
        with self._lock:
            intervals, self._intervals = self._intervals, []
        losses, self._losses = self._losses, []
        start = self._step_start if self._step_start is not None else end
        first = (self._samples, self._samples_from) if self._samples_from is not None else None
        if self._stages and 0 not in self._stages:   # a later stage's module gets activations, not samples
            first = None
        samples = self.reader.step_samples(self._declared_samples, self.given_samples, first, self._backwards)
        if self._stages and 0 not in self._stages and self._declared_samples is None:
            samples = 0
        declared_loss, self._declared_samples, self._declared_loss = self._declared_loss, None, None
        flops = None
        if self._counting is not None:   # the counted step ends
            self._counting.__exit__(None, None, None)
            self._counting, flops = None, {self.device: sum(self.flops.by_device.values())}
        self._queued.append(QueuedStep(self.step, start, end, intervals, losses, declared_loss, samples, flops))
        self.step += 1
        self._profile_boundary(self.step - 1)
        self._step_start, self._forwarded, self._samples, self._backward_seen = end, False, 0, False
        self._samples_from, self._backwards, self._boundary, self._loader_timed = None, 0, None, False
        if self._optimized and self._steppers is None:
            self._steppers = set(self._stepped_now)
        self._stepped_now = set()
        if self.clock.renew():
            self.clock.reanchor()
        if self.max_steps is not None and self.step >= self.max_steps:
            self.flush()
            raise WatchEnded(f"{self.step} steps watched")
        # the counted step's FLOPs from its first forward on (a step ended late, at an optimizer's second step,
        # has had the next one's forward already: the one after it is counted)
        if self._count_flops and self.step == counted_step(self.max_steps or 0, self.profiled()):
            self._count_next = True   # until a step starts with its first forward (not one ended late)
        self._report(wait=False)

    def profiled(self) -> range:
        """The steps torch.profiler records (--profile-steps; none without)."""
        return self.profiler.recorded if self.profiler is not None else range(0)

    def _profile_boundary(self, ended: int | None) -> None:
        """torch.profiler over the steps asked for (--profile-steps, engine/measure/profiling.py): the step that
        ``ended`` closes its mark (after the last, the trace is written and said), the next one opens its own."""
        profiler = self.profiler
        if profiler is None:
            return
        if ended is not None:
            trace = profiler.after_step(ended)
            if trace is not None:
                self.emit(Profiled(trace, profiler.started_at))
        profiler.before_step(self.step, time.perf_counter())

    def close_profiler(self) -> None:
        """The script ended (or failed, or its steps were watched) inside the profiled steps: none kept."""
        if self.profiler is not None:
            self.profiler.close()

    def _start_counting(self) -> None:
        self._count_next = False
        self.uncounted = compiled()
        if self.uncounted is None:
            from engine.measure.flops import DeviceFlops
            self.flops = DeviceFlops(self.device)
            self._counting = self.flops.counting()
            self._counting.__enter__()

    def flush(self) -> None:
        """Every step so far reported, waiting for the GPU where it has not passed their marks."""
        self._report(wait=True)

    def _report(self, wait: bool) -> None:
        while self._queued:
            queued = self._queued[0]
            marks = queued.marks()
            if not self.clock.done(marks):
                if not wait and len(self._queued) <= QUEUED_AT_MOST:
                    return
                self.clock.wait(marks)
            self._queued.pop(0)
            self.emit(as_report(queued, self.clock, self.device))


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
