"""The watched script's time, as marks: the host clock on CPU devices, CUDA events on a GPU.

A GPU runs the work the host queued, later: a forward hook's host time is when the forward
was launched, not when it ran. On a GPU each mark is an event recorded on the stream current
at the hook (the stream that runs the work it brackets), and a step's marks become seconds
once the GPU has passed them: ``done`` asks without waiting, so the script's host keeps
running ahead as it would unwatched. Seconds are on the host's ``time.perf_counter()`` (the
clock every rank shares, engine/measure/timing.py): an anchor pairs the host clock with an
event recorded while the GPU is idle, and an event's time is its anchor's plus the GPU's
elapsed time between them. The anchor is renewed every ``ANCHOR_EVERY_S`` (one synchronize, at a
step's end), so the two clocks' drift never adds up; each mark keeps the anchor it was made under.
A mark may also be a host time (a phase the script timed itself, a barrier before the first
forward): ``seconds`` takes either.
"""
from __future__ import annotations

import time
from typing import NamedTuple

ANCHOR_EVERY_S = 10.0


class HostClock:
    """Marks on the host clock: a CPU device's work runs when it is called."""
    deferred = False   # a mark is a time as soon as it is taken

    def now(self) -> float:
        return time.perf_counter()

    def done(self, marks) -> bool:
        return True

    def seconds(self, mark) -> float:
        return mark

    def wait(self, marks) -> None:
        pass

    def renew(self) -> bool:
        """Whether it is time to ``reanchor`` (a GPU's clock and the host's drift apart)."""
        return False

    def reanchor(self) -> None:
        pass


class Anchor(NamedTuple):
    """The host clock's time of an event recorded on an idle GPU."""
    host: float
    event: object


class CudaMark(NamedTuple):
    event: object
    anchor: Anchor   # the anchor when it was recorded: a renewed one never meets a mark made before it


class CudaClock:
    """Marks as CUDA events on GPU ``index``'s current stream."""
    deferred = True    # a mark is a time once the GPU has passed it

    def __init__(self, index: int):
        import torch
        self._torch = torch
        self.index = index
        self._anchor: Anchor | None = None

    def reanchor(self) -> None:
        torch = self._torch
        torch.cuda.synchronize(self.index)   # idle, so the anchor fires as it is recorded
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.index))
        self._anchor = Anchor(time.perf_counter(), event)
        event.synchronize()

    def now(self) -> CudaMark:
        torch = self._torch
        if self._anchor is None:
            self.reanchor()
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.index))
        return CudaMark(event, self._anchor)

    def done(self, marks) -> bool:
        return all(not isinstance(m, CudaMark) or m.event.query() for m in marks)

    def wait(self, marks) -> None:
        for mark in marks:
            if isinstance(mark, CudaMark):
                mark.event.synchronize()

    def seconds(self, mark) -> float:
        if not isinstance(mark, CudaMark):
            return mark
        return mark.anchor.host + mark.anchor.event.elapsed_time(mark.event) / 1000.0

    def renew(self) -> bool:
        return self._anchor is not None and time.perf_counter() - self._anchor.host > ANCHOR_EVERY_S


def clock_for(module, device) -> tuple[HostClock | CudaClock, str | None]:
    """The clock for a watched rank on ``device`` (engine.devices.Device) whose model is ``module`` (its first
    forward), and what a reader must know where the model is not on that kind of device (its work is then
    timed on the host: the launches of a GPU's work, not the work)."""
    parameter = next(iter(module.parameters()), None)
    where = getattr(parameter, "device", None)
    on_gpu = where is not None and where.type == "cuda"
    if on_gpu and device.kind == "cuda":
        import torch
        index = where.index if where.index is not None else torch.cuda.current_device()
        # (the same words on every rank, so the run's notes say it once)
        return CudaClock(index), None if index == device.index else (
            "a rank's model is on another GPU than its own: rank k's work is timed on the GPU it runs on and shown "
            "as cuda:k's (give rank k cuda:k, its LOCAL_RANK)")
    if on_gpu != (device.kind == "cuda") and where is not None:
        return HostClock(), (f"the script's model is on {where.type}, not on the watch's kind of device "
                             f"({device.kind}): its times are the host's, and its FLOPs are not set against a peak "
                             f"(watch it on {'cuda:0,...' if on_gpu else 'cpu:N'})")
    return HostClock(), None
