"""What a run's summary needs from its steps, kept as running sums: memory that does not grow with the run.

An hour of a small pipeline is hundreds of thousands of steps; the worker used to
keep every merged step (with its intervals) to summarize them at the end, and
grew by about 18 KB a step. ``RunTotals`` takes each merged step once and keeps
counts, sums and Welford's running mean and variance (the same figures
``statistics.fmean`` and ``statistics.stdev`` give over all the steps).
"""
from __future__ import annotations

import math

from engine.measure.communication import OPERATIONS
from engine.record.time_by_kind import BETWEEN_STEPS, OTHER, exclusive, ordered
from engine.results import BatchSplit, Communication, DeviceKinds, MeanStd, Step, Traffic


class RunningStat:
    """Mean and sample standard deviation of a stream (Welford), as statistics.fmean/stdev of the whole."""

    def __init__(self):
        self.n, self.mean, self._m2 = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (x - self.mean)

    def summary(self) -> MeanStd | None:
        """The mean and the sample standard deviation, or None before the first value."""
        if not self.n:
            return None
        return MeanStd(self.mean, math.sqrt(self._m2 / (self.n - 1)) if self.n > 1 else 0.0)


class RunTotals:
    """Running totals of a run's merged steps (engine.record.step_merger.StepMerger's output)."""

    def __init__(self, devices: list[str], warmup: int):
        self.devices = list(devices)
        self.warmup = warmup
        self.steps = 0
        self.measured = 0
        self.step_time = RunningStat()
        self.throughput = RunningStat()
        self.total_time = 0.0                            # seconds of measured steps
        self.samples = 0                                 # samples of measured steps
        self.busy_time = dict.fromkeys(self.devices, 0.0)  # busy seconds per device, measured steps
        self.work_time = dict.fromkeys(self.devices, 0.0)  # the same without drawing the batch ("data")
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        self.batch_splits: dict[tuple, int] = {}         # each per-device batch split, with its step count
        self.tensor_memory: dict[str, dict[str, int]] = {}  # each device's by kind, as last reported
        self.tensor_memory_peak: dict[str, dict[str, int]] = {}  # and its most over the measured steps
        self.communication: dict[str, dict[str, list]] = {}  # device -> operation -> [calls, bytes, seconds], measured
        self.communication_steps: dict[str, int] = {}  # measured steps each device reported its collectives on
        self.kind_time = {d: {} for d in self.devices}    # device -> kind -> seconds, measured steps, each
        # moment once (time_by_kind.exclusive); and what each kind spent hidden under another, and between steps
        self.hidden_time: dict[str, dict[str, float]] = {d: {} for d in self.devices}
        self.between_time: dict[str, dict[str, float]] = {d: {} for d in self.devices}
        self.flops: dict[str, float] | None = None        # device -> FLOPs a step, from the step counted

    def add(self, step: Step) -> None:
        self.steps += 1
        if step.loss is not None:
            if self.first_loss is None:
                self.first_loss = step.loss
            self.last_loss = step.loss
        if step.batch_split is not None:
            key = tuple(step.batch_split)
            self.batch_splits[key] = self.batch_splits.get(key, 0) + 1
        if step.tensor_memory:
            self.tensor_memory = step.tensor_memory
        if step.flops is not None:
            self.flops = {d: step.flops.get(d, 0.0) for d in self.devices}
        if step.step < self.warmup:
            return
        for device, kinds in self.tensor_memory.items():
            peak = self.tensor_memory_peak.setdefault(device, {})
            for kind, size in kinds.items():
                # The step peak is one tracked step's, by kind (a dict): kept as reported.
                peak[kind] = size if kind == "step_peak" else max(peak.get(kind, 0), size)
        for device, operations in (step.communication or {}).items():
            self.communication_steps[device] = self.communication_steps.get(device, 0) + 1
            for operation, values in operations.items():
                sums = self.communication.setdefault(device, {}).setdefault(operation, [0, 0, None])
                for i, value in enumerate(values):
                    if value is not None:
                        sums[i] = (sums[i] or 0) + value
        time_s = step.time_s
        self.measured += 1
        self.step_time.add(time_s)
        self.throughput.add(step.throughput)
        self.total_time += time_s
        self.samples += step.samples or 0
        busy = step.busy or {}
        work = step.work or busy
        for d in self.devices:
            self.busy_time[d] += busy.get(d, 0.0) * time_s
            self.work_time[d] += work.get(d, 0.0) * time_s
        end = step.t
        for d, intervals in (step.intervals or {}).items():
            held, hidden = exclusive(intervals, end - time_s, end)
            for sums, add in ((self.kind_time.setdefault(d, {}), held), (self.hidden_time.setdefault(d, {}), hidden)):
                for kind, seconds in add.items():
                    sums[kind] = sums.get(kind, 0.0) + seconds
            between = self.between_time.setdefault(d, {})
            for kind, t0, t1 in intervals:
                if kind in BETWEEN_STEPS:
                    between[kind] = between.get(kind, 0.0) + (t1 - t0)

    def throughput_summary(self) -> MeanStd | None:
        """Samples over time across the measured steps (a mean of each step's rate would weigh a fast step as
        much as a slow one: on uneven steps it says many times the real rate), and the per-step rates' spread."""
        spread = self.throughput.summary()
        if spread is None or self.total_time <= 0:
            return None
        return MeanStd(self.samples / self.total_time, spread.std)

    def time_by_kind(self) -> list[DeviceKinds] | None:
        """Each device's mean seconds per measured step by kind, and idle (engine/record/time_by_kind.py)."""
        if not self.measured or self.total_time <= 0 or not any(self.kind_time.values()):
            return None
        n, step = self.measured, self.total_time / self.measured

        def per_step(sums: dict[str, float]) -> dict[str, float]:
            return {k: sums[k] / n for k in ordered(sums)}

        def with_other(sums: dict[str, float]) -> dict[str, float]:   # the kinds add up to the step
            rest = self.total_time - sum(sums.values())
            return per_step({**sums, OTHER: rest} if rest > 1e-9 * n and sums else sums)
        return [DeviceKinds(d, step, with_other(self.kind_time[d]), max(0.0, self.total_time - self.busy_time[d]) / n,
                            hidden=per_step(self.hidden_time.get(d, {})),
                            between_steps=per_step(self.between_time.get(d, {}))) for d in self.devices]

    def busy_shares(self, work_only: bool = False) -> list[float] | None:
        """Each device's busy time over the measured steps' time (``work_only``: leaving out "data")."""
        if not self.measured or self.total_time <= 0:
            return None
        times = self.work_time if work_only else self.busy_time
        return [min(1.0, times[d] / self.total_time) for d in self.devices]

    def communication_per_step(self, device: str) -> Communication | None:
        """The device's collectives per measured step that reported them, by operation; None when it had none."""
        operations = self.communication.get(device)
        if not operations or not self.measured:
            return None
        order = sorted(operations, key=lambda op: OPERATIONS.index(op) if op in OPERATIONS else len(OPERATIONS))
        n = self.communication_steps[device]
        return Communication([Traffic(op, operations[op][0] / n, operations[op][1] / n,
                                      operations[op][2] / n if operations[op][2] is not None else None)
                              for op in order])

    def batch_split_counts(self) -> list[BatchSplit]:
        """Each distinct split of the batch (samples per replica) and its steps, in the order they first came."""
        return [BatchSplit(list(split), n) for split, n in self.batch_splits.items()]
