"""``--profile-steps N``: torch.profiler over N steps of a rank (its first measured, or from ``--profile-from``), its
Chrome trace kept with the run; a watched script's the same (engine/watch/step_queue.py).

Each rank profiles its own process (CPU ops, and CUDA kernels where it drives a
GPU), writes the profiler's Chrome trace to a file of its own and says where
(a ``profile`` event, with the perf_counter time its first profiled step began);
the session stores the file in the run store (engine.store ``profiles``) and
removes it. The trace export (engine/export/trace.py) puts its events on the
run's clock by that first step's marker (``STEP_MARK``, a record_function
around each profiled step).
"""
from __future__ import annotations

import os
import tempfile

TRACE_PREFIX = "splitscope-rank"   # a rank's trace file, until the session stores it (engine/run/local_ranks.py)

STEP_MARK = "splitscope step "   # + the step number: the annotation around each profiled step


def first_profiled(config) -> int:
    """The first step ``--profile-steps`` records: ``--profile-from``, else the first measured."""
    return config.warmup if config.profile_from is None else config.profile_from


def profiled_steps(config) -> range:
    """The steps ``--profile-steps`` records (none without it)."""
    first = first_profiled(config)
    return range(first, first + config.profile_steps)


class StepProfiler:
    def __init__(self, steps: int, first_step: int, cuda: bool, rank: int):
        self.steps, self.first, self.cuda, self.rank = steps, first_step, cuda, rank
        self._profiler = None
        self._mark = None
        self.started_at: float | None = None

    @property
    def recorded(self) -> range:
        """The steps it records."""
        return range(self.first, self.first + self.steps)

    def before_step(self, step: int, now: float) -> None:
        if self.steps and step == self.first:
            import torch.profiler
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.cuda:
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._profiler = torch.profiler.profile(activities=activities)
            self._profiler.start()
        if self._profiler is not None:
            import time

            import torch.profiler
            self._mark = torch.profiler.record_function(f"{STEP_MARK}{step}")
            self._mark.__enter__()
            if step == self.first:
                # The mark's start, not the step's: the profiler's own start-up lies between them.
                self.started_at = time.perf_counter()

    def after_step(self, step: int) -> str | None:
        """The trace file, once the last profiled step ended; None before and after."""
        if self._profiler is None:
            return None
        self._mark.__exit__(None, None, None)
        self._mark = None
        if step < self.first + self.steps - 1:
            return None
        self._profiler.stop()
        handle, path = tempfile.mkstemp(prefix=f"{TRACE_PREFIX}{self.rank}-", suffix=".json")
        os.close(handle)
        try:
            self._profiler.export_chrome_trace(path)
        except BaseException:
            os.remove(path)
            raise
        finally:
            self._profiler = None
        return path

    def close(self) -> None:
        if self._profiler is not None:  # a run stopped mid-profile: nothing to keep
            self._profiler.stop()
            self._profiler = None
