"""The ``telemetry`` section of a run's summary (docs/summary.md).

Only samples taken between the first and the last measured step count: before
the first step the worker is still starting (imports, model build), after the
last it is tearing down, and neither is the training being measured. Those
samples stay stored with the run; they just do not enter the means.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.telemetry.sample import DeviceSample

DISTURBED_POINTS = 10.0
"""A device whose core others took more than this share of (percent) ran a run whose times are not comparable."""


@dataclass(frozen=True)
class TelemetrySummary:
    rate_hz: float | None = None
    util_mean: list[float | None] = field(default_factory=list)        # percent, per device
    samples: int = 0
    samples_per_s: list[float | None] = field(default_factory=list)
    mem_peak_bytes: list[int | None] = field(default_factory=list)
    disagreement: str | None = None     # where the OS's (or NVML's) busy share and the engine's disagree
    other_mean: list[float | None] = field(default_factory=list)
    """Percent of each device's core that other programs and the hypervisor's steal time took (its core's
    total less the run's own work), mean over the measured steps; None where not measured (GPUs)."""
    disturbed: str | None = None        # which devices others took more than DISTURBED_POINTS of, and how much
    sm_active_mean: list[float | None] = field(default_factory=list)
    """Percent, per device: a GPU's SM activity (NVML's GPM, DeviceSample.sm_active) over the measured steps,
    beside ``util_mean``; None where not sampled (CPU devices, GPUs before Hopper)."""
    power_w: list[float | None] = field(default_factory=list)
    """Watts per device over the measured steps, from its energy counter (DeviceSample.energy_j: a GPU's NVML
    total energy); None where the device has none."""


class TelemetryTotals:
    """The ``telemetry`` section built as a run goes, in memory that does not grow with the run.

    Steps tile the run: step k covers (end of step k-1, end of step k]. So once the
    step whose end a sample precedes has come, whether the sample is in the measured
    window is known: it counts if that step is past the warm-up. Only the samples
    newer than the last step wait (at most a step's worth); the peak memory is a
    running maximum. The figures are those of ``summarize`` over all the samples.
    """

    def __init__(self, device_names: list[str], warmup: int, rate_hz: float):
        self.names = list(device_names)
        self.warmup = warmup
        self.rate_hz = rate_hz
        self._index = {name: i for i, name in enumerate(self.names)}
        self._pending: list[tuple[float, int, DeviceSample]] = []  # newer than the last step, by time
        self._serial = 0
        self.samples = 0
        self.mem_peak: list[int | None] = [None] * len(self.names)
        # [measured window, warm-up window]: the warm-up's figures stand in when no step was measured.
        self._util_sum = [[0.0] * len(self.names) for _ in range(2)]
        self._util_count = [[0] * len(self.names) for _ in range(2)]
        self._other_sum = [[0.0] * len(self.names) for _ in range(2)]
        self._other_count = [[0] * len(self.names) for _ in range(2)]
        self._in_window = [[0] * len(self.names) for _ in range(2)]
        self._first = [None, None]   # window start per kind
        self._sm_sum = [[0.0] * len(self.names) for _ in range(2)]
        self._sm_count = [[0] * len(self.names) for _ in range(2)]
        # per kind and device, the first and last (t, energy_j) reading in the window
        self._energy_first = [[None] * len(self.names) for _ in range(2)]
        self._energy_last = [[None] * len(self.names) for _ in range(2)]
        self._last = [None, None]    # window end per kind
        self._last_kind: int | None = None

    def add_samples(self, samples: Iterable[DeviceSample]) -> None:
        for sample in samples:
            self.samples += 1
            i = self._index.get(sample.device)
            if i is None:
                continue
            if sample.mem_used is not None and (self.mem_peak[i] is None or sample.mem_used > self.mem_peak[i]):
                self.mem_peak[i] = sample.mem_used
            self._serial += 1
            bisect.insort(self._pending, (sample.t, self._serial, sample))

    def add_step(self, step: int, start: float, end: float) -> None:
        """A merged step's [start, end] on the samples' clock: the samples up to its end are settled."""
        kind = 0 if step >= self.warmup else 1
        if self._first[kind] is None:
            self._first[kind] = start
        self._last[kind] = end
        self._last_kind = kind
        self._settle(kind, end)

    def finish(self) -> None:
        """The run ended: samples up to the last step's end that came after it count too."""
        if self._last_kind is not None:
            self._settle(self._last_kind, self._last[self._last_kind])
        self._pending = []

    def _settle(self, kind: int, end: float) -> None:
        cut = bisect.bisect_right(self._pending, (end, float("inf")))
        settled, self._pending = self._pending[:cut], self._pending[cut:]
        for t, _, sample in settled:
            if t < self._first[kind]:
                continue  # before this kind's window (start-up, or the warm-up before the measured steps)
            i = self._index[sample.device]
            self._in_window[kind][i] += 1
            if getattr(sample, "sm_active", None) is not None:
                self._sm_sum[kind][i] += sample.sm_active
                self._sm_count[kind][i] += 1
            energy = getattr(sample, "energy_j", None)
            if energy is not None:
                if self._energy_first[kind][i] is None:
                    self._energy_first[kind][i] = (t, energy)
                self._energy_last[kind][i] = (t, energy)
            if sample.util is not None:
                self._util_sum[kind][i] += sample.util
                self._util_count[kind][i] += 1
                if sample.core_util is not None:
                    # Summed unclipped: a core's 10 ms ticks put one sample above its own work and the next
                    # below; clipping each at 0 would count that noise as others' time. What the run's threads
                    # waited for is not theirs: the core ran something else then.
                    self._other_sum[kind][i] += sample.core_util - sample.util + (sample.wait_util or 0.0)
                    self._other_count[kind][i] += 1

    def summary(self) -> TelemetrySummary:
        kind = 0 if self._first[0] is not None else 1
        window = (self._last[kind] - self._first[kind]) if self._first[kind] is not None else 0.0
        sums, counts = self._util_sum[kind], self._util_count[kind]
        other, other_counts = self._other_sum[kind], self._other_count[kind]
        other_mean = [round(max(0.0, other[i] / other_counts[i]), 1) if other_counts[i] else None
                      for i in range(len(self.names))]
        return TelemetrySummary(
            rate_hz=self.rate_hz,
            util_mean=[round(sums[i] / counts[i], 1) if counts[i] else None for i in range(len(self.names))],
            samples=self.samples,
            samples_per_s=[round(n / window, 2) if window > 0 else None for n in self._in_window[kind]],
            mem_peak_bytes=list(self.mem_peak),
            other_mean=other_mean,
            disturbed=disturbance(other_mean, self.names),
            sm_active_mean=[round(total / n, 1) if n else None
                            for total, n in zip(self._sm_sum[kind], self._sm_count[kind], strict=True)],
            power_w=[_power(first, last)
                     for first, last in zip(self._energy_first[kind], self._energy_last[kind], strict=True)],
        )


def _power(first: tuple[float, float] | None, last: tuple[float, float] | None) -> float | None:
    """Mean watts between two (t, joules) readings of a counter; None without two readings apart in time."""
    if first is None or last is None or last[0] <= first[0]:
        return None
    return (last[1] - first[1]) / (last[0] - first[0])


def summarize(samples: Iterable[DeviceSample], device_names: list[str],
              t_first_step: float | None, t_last_step: float | None, rate_hz: float) -> TelemetrySummary:
    """The telemetry section of a run's summary over all ``samples``.

    ``util_mean[i]`` is the mean utilization (percent) of ``device_names[i]``
    over samples with ``t_first_step <= t <= t_last_step`` that have one, None
    if none do; ``samples_per_s[i]`` is that device's sample count in the window
    divided by the window's length (None for an empty window); ``samples`` counts
    every stored sample, inside the window or not; ``mem_peak_bytes`` the most
    memory each device used, at any time. Times are perf_counter seconds.
    """
    totals = TelemetryTotals(device_names, warmup=0, rate_hz=rate_hz)
    totals.add_samples(samples)
    if t_first_step is not None and t_last_step is not None and t_last_step >= t_first_step:
        totals.add_step(0, t_first_step, t_last_step)
    totals.finish()
    return totals.summary()


def disagreements(util_mean: list[float | None], devices_busy: list[float | None],
                  device_names: list[str], tolerance_points: float = 10.0) -> list[str]:
    """Where the OS's utilization and the engine's busy fraction differ by more than
    ``tolerance_points`` (percentage points), one line per device, for the summary.

    ``devices_busy`` is the engine-timed busy fraction (0..1) per device. The two
    measure different things (the OS counts any work on the core or GPU, the
    engine only the intervals it timed), so a gap is worth showing, not an error.
    """
    lines = []
    for name, util, busy in zip(device_names, util_mean, devices_busy, strict=False):
        if util is None or busy is None:
            continue
        engine_percent = 100.0 * busy
        if abs(util - engine_percent) > tolerance_points:
            lines.append(f"{name}: the OS measured {util:.1f}% busy, the engine timed {engine_percent:.1f}% "
                         f"(more than {tolerance_points:g} points apart)")
    return lines


def disturbance(other_mean: list[float | None], device_names: list[str]) -> str | None:
    """The run's "disturbed" mark: the devices whose cores others took more than DISTURBED_POINTS percent of,
    in words, or None. Busy intervals stretch while another program holds the core, so such a run's times
    are not those of the split or the schedule alone."""
    taken = [(name, other) for name, other in zip(device_names, other_mean, strict=True)
             if other is not None and other > DISTURBED_POINTS]
    if not taken:
        return None
    shares = ", ".join(f"{other:.0f}% of {name}" for name, other in taken)
    return f"other programs took {shares} during this run: its times are not comparable"
