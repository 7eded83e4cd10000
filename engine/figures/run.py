"""A run's figures, from what a run left: its summary, steps, telemetry samples and timeline rows.

``run_figures(RunView)`` is every figure of one run (the exports draw all of
them, the app's history the ones it has plots for); ``comparison_figures`` lays
several runs over each other (the app's history, runs selected together). The
frames below (a figure without data) also title the app's live plots.

Where the rows come from decides how many there are: an export reads at most
100,000 of each (engine/export/figures.py), the app's history a few thousand;
a title says when its figure holds every k-th step or bucketed telemetry.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.figures import palette
from engine.figures.figure import Axis, Bars, Figure, Mark, Segment, Series, series_table
from engine.figures.gaps import broken, gap_after
from engine.figures.heatmap import heat_figure, uses_heatmap
from engine.figures.numbers import is_number, pct, scaled, time_unit
from engine.figures.run_names import run_names
from engine.figures.schedule_plan import schedule_plan_figure
from engine.figures.timeline import TIMELINE_STEPS, device_order, timeline_figure
from engine.measure.communication import OPERATIONS
from engine.results import Communication, RunSummary, Sample, Step, TensorMemory
from engine.telemetry.smooth import SMOOTH_S, core_total_apart, trailing_mean

MIB = 2 ** 20
TIME = Axis("time since the run started", "s")
STEP = Axis("step")

UTILIZATION = Figure("utilization", "Utilization per device", TIME, Axis("utilization", "%"), y_range=(0, 100))
MEMORY = Figure("memory", "Memory used per device", TIME, Axis("memory used", "MiB"), y_range=(0, None))
THROUGHPUT = Figure("throughput", "Throughput per step", STEP, Axis("throughput", "samples/s"))
STEP_TIME = Figure("step-time", "Step time per step", STEP, Axis("step time", "s"))
LOSS = Figure("loss", "Loss per step", STEP, Axis("loss"))
BUSY = Figure("busy", "Busy share of step time per device", Axis("device"), Axis("busy", "% of step time"))
TENSOR_MEMORY = Figure("tensor-memory", "Tensor memory per device by kind (the most over the measured steps)",
                       Axis("device"), Axis("tensor memory", "MiB"))
COMMUNICATION = Figure("communication", "Communication per device per step, by collective (payload bytes)",
                       Axis("device"), Axis("bytes per step", "MiB"))
# The kinds of tensor memory, bottom to top of a device's stack (engine/measure/tensor_memory.py; "other": what a GPU's
# allocator or fsdp's peak tracker saw beyond them, TensorMemory.other).
MEMORY_KINDS = ("params", "grads", "optimizer", "activations", "other")
PEAK_PREFIX = "step peak: "   # the tensor memory table's columns of fsdp's tracked step, one per torch kind
# MFU: model FLOP/s over the device's peak (engine.results.mfu); a short title, as the plot shares its row.
EFFICIENCY = Figure("efficiency", "MFU per device per step", STEP, Axis("MFU", "%"), y_range=(0, None))
BATCH_SPLIT = Figure("batch-split", "Samples each device got per step", STEP, Axis("samples"), y_range=(0, None))
# A run's one curve per step figure, in its own colour (the throughput and loss plots sit side by side).
STEP_COLORS = {"throughput": palette.series_color(0), "loss": palette.series_color(1),
               "step-time": palette.series_color(2)}


@dataclass(frozen=True)
class RunView:
    """What a run's figures are drawn from: the store's rows (an export) or the app's RunData (its history)."""
    summary: RunSummary = field(default_factory=RunSummary)
    steps: Sequence[Step] = ()              # every step, or every k-th step (and the last) of a long run
    samples: Sequence[Sample] = ()          # telemetry, as sampled or in buckets
    timeline: Sequence[Sequence] = ()       # (step, device, kind, t0, t1) of the last steps that kept them
    step_count: int = 0                     # steps stored
    timeline_steps: int = 0                 # steps whose every interval is stored
    warmup: int | None = None               # steps the summary leaves out
    label: str = ""                         # how the history names the run ("18:29:22 pipeline")
    config: dict = field(default_factory=dict)   # what it ran with: a comparison names what differs
    sample_rows: int = 0                    # telemetry rows stored, when ``samples`` are buckets of them
    sample_bucket_s: float | None = None    # the buckets' width, when they are

    @property
    def devices(self) -> list[str]:
        return device_order(self.summary.devices, dict.fromkeys(s.device for s in self.samples))

    def samples_of(self, device: str) -> list[Sample]:
        """The device's samples (grouped once: a figure per device over every sample was quadratic)."""
        if "_by_device" not in self.__dict__:
            grouped: dict[str, list[Sample]] = {}
            for s in self.samples:
                grouped.setdefault(s.device, []).append(s)
            object.__setattr__(self, "_by_device", grouped)
        return self.__dict__["_by_device"].get(device, [])

    @property
    def of_steps(self) -> str:
        """" (1 step in 2 of 200,000)" when ``steps`` is every k-th step."""
        if self.step_count <= len(self.steps) or len(self.steps) < 2:
            return ""
        return f" (1 step in {self.steps[1].step - self.steps[0].step} of {self.step_count:,})"

    @property
    def of_samples(self) -> str:
        if self.sample_bucket_s is None:
            return ""
        return f" ({self.sample_bucket_s:.2g}-s means of {self.sample_rows:,} samples)"


def run_figures(run: RunView) -> list[Figure]:
    devices = run.devices
    figures = [
        utilization_figure(run, devices), memory_figure(run, devices),
        step_figure(THROUGHPUT, run, "throughput"), step_time_figure(run), step_figure(LOSS, run, "loss"),
        timeline_figure(run.timeline, devices, steps=run.steps, bubble=run.summary.bubble,
                        kept=(run.timeline_steps, run.step_count), last=TIMELINE_STEPS, plan=run.summary.plan),
        busy_figure(run.summary, devices), efficiency_figure(run),
    ]
    if any(s.batch_split for s in run.steps):
        figures.append(batch_split_figure(run.steps, devices))
    if run.summary.tensor_memory:
        figures.append(tensor_memory_figure(run.summary.devices, run.summary.tensor_memory))
    if run.summary.communication:
        figures.append(communication_figure(run.summary.devices, run.summary.communication))
    if run.summary.plan:
        figures.append(schedule_plan_figure(run.summary.plan, devices, run.summary.schedule))
    return figures


# ---- telemetry ---------------------------------------------------------------------------
def _by_time(samples: Sequence[Sample], field_name: str, factor: float) -> dict[float, dict[str, float]]:
    """One row per sampling instant (the sampler reads all devices at once), a value per device."""
    by_t: dict[float, dict[str, float]] = {}
    for s in samples:
        value = getattr(s, field_name)
        if value is not None:
            by_t.setdefault(s.t, {})[s.device] = value * factor
    return dict(sorted(by_t.items()))


def _measured(run: RunView, device: str, field_name: str, factor: float) -> tuple[list[float], list[float], list]:
    """A device's (times, values, spans) of ``field_name``, in time order; a span where a sample is a bucket."""
    rows = sorted((s.t, getattr(s, field_name) * factor, s.span_s) for s in run.samples_of(device)
                  if getattr(s, field_name) is not None)
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def telemetry_series(name: str, t: list[float], values: list, spans: list, color: str, **style) -> Series:
    """A telemetry curve with its gaps (engine/figures/gaps.py): no line across time without samples."""
    return Series(name, *broken(t, values, gap_after(t, spans)), color, **style)


def utilization_figure(run: RunView, devices: list[str]) -> Figure:
    """Each device's one-second mean (engine.telemetry.smooth) over its faint raw samples: a core's 10 ms
    ticks make the raw line swing 0-100 % at 10 Hz. The table has both. Many devices: a heatmap of them."""
    by_t = _by_time(run.samples, "util", 1.0)
    core_by_t = _by_time(run.samples, "core_util", 1.0)
    sm_by_t = _by_time(run.samples, "sm_active", 1.0)
    measured = {d: _measured(run, d, "util", 1.0) for d in devices}
    means = {d: trailing_mean(t, values) if t else [] for d, (t, values, _) in measured.items()}
    mean_at = [dict(zip(measured[d][0], means[d], strict=True)) for d in devices]
    core_seen = {d for values in core_by_t.values() for d in values}
    sm_seen = {d for values in sm_by_t.values() for d in values}
    core_devices = [d for d in devices if d in core_seen]
    sm_devices = [d for d in devices if d in sm_seen]
    columns = (["t (ms)"] + [f"util {d} (%)" for d in devices]
               + [f"util {d} {SMOOTH_S:g}-s mean (%)" for d in devices]
               + [f"core total {d} (%)" for d in core_devices] + [f"SM activity {d} (%)" for d in sm_devices])
    rows = [[t * 1000] + [values.get(d) for d in devices] + [m.get(t) for m in mean_at]
            + [core_by_t.get(t, {}).get(d) for d in core_devices] + [sm_by_t.get(t, {}).get(d) for d in sm_devices]
            for t, values in by_t.items()]
    title = UTILIZATION.title + run.of_samples
    if uses_heatmap(len(devices)):   # too many lines to tell apart: a row per device (engine/figures/heatmap.py)
        return heat_figure(UTILIZATION, {d: measured[d][:2] for d in devices}, title=title, table=(columns, rows))
    raw, lines, cores = [], [], []
    for i, device in enumerate(devices):
        (t, values, spans), mean = measured[device], means[device]
        color = palette.device_color(device, i)
        raw.append(telemetry_series(f"{device} raw", t, values, spans, color, width=1.0, faint=True))
        lines.append(telemetry_series(device, t, mean, spans, color))
        # A CPU device's core's total (other programs too), dashed, where it came apart from the device's own.
        core_t, core_values, core_spans = _measured(run, device, "core_util", 1.0)
        core_mean = trailing_mean(core_t, core_values) if core_t else []
        if core_t and core_total_apart(t, mean, core_t, core_mean):
            cores.append(telemetry_series(f"{device} core total (all programs)", core_t, core_mean, core_spans,
                                          color, dash=2, width=1.0))
        # A GPU's SM activity (NVML's GPM), dotted on the same axis: busy is not the same as used.
        sm_t, sm_values, sm_spans = _measured(run, device, "sm_active", 1.0)
        if sm_t:
            cores.append(telemetry_series(f"{device} SM activity", sm_t, sm_values, sm_spans, color, dash=1,
                                          width=1.2))
    return UTILIZATION.with_data(title=title, series=raw + lines + cores, columns=columns, rows=rows)


def memory_figure(run: RunView, devices: list[str]) -> Figure:
    by_t = _by_time(run.samples, "mem_used", 1 / MIB)
    rows = [[t * 1000] + [values.get(d) for d in devices] for t, values in by_t.items()]
    columns = ["t (ms)"] + [f"mem {d} (MiB)" for d in devices]
    if uses_heatmap(len(devices)):
        return heat_figure(MEMORY, {d: _measured(run, d, "mem_used", 1 / MIB)[:2] for d in devices},
                           title=MEMORY.title + run.of_samples, table=(columns, rows))
    series = [telemetry_series(d, *_measured(run, d, "mem_used", 1 / MIB), palette.device_color(d, i))
              for i, d in enumerate(devices)]
    return MEMORY.with_data(title=MEMORY.title + run.of_samples, series=series, columns=columns, rows=rows)


# ---- steps -------------------------------------------------------------------------------
def warmup_marks(warmup, steps: Sequence[Step]) -> list[Mark]:
    """Steps before this line are warm-up: the summary leaves them out."""
    if not steps or not is_number(warmup) or warmup <= 0:
        return []
    return [Mark(warmup - 0.5, "warm-up ends", color=palette.MUTED)]


def step_figure(frame: Figure, run: RunView, key: str) -> Figure:
    rows = [[s.step, getattr(s, key)] for s in run.steps]
    series = Series(frame.y.label, [r[0] for r in rows], [r[1] for r in rows], STEP_COLORS[frame.name])
    return frame.with_data(title=frame.title + run.of_steps, series=[series],
                           marks=warmup_marks(run.warmup, run.steps), columns=["step", frame.y.text], rows=rows)


def step_time_figure(run: RunView) -> Figure:
    times = [s.time_s for s in run.steps]
    unit, factor = time_unit(times)
    series = Series("step time", [s.step for s in run.steps], scaled(times, factor), STEP_COLORS["step-time"])
    return STEP_TIME.with_data(title=STEP_TIME.title + run.of_steps, y=Axis("step time", unit), series=[series],
                               marks=warmup_marks(run.warmup, run.steps), columns=["step", "step time (ms)"],
                               rows=[[s.step, t]   # tables: ms
                                     for s, t in zip(run.steps, scaled(times, 1000.0), strict=True)])


def efficiency_figure(run: RunView) -> Figure:
    """Each device's MFU step by step: the FLOPs of its work in a step (the summary's, counted once) over the
    step's time and its peak (DeviceEfficiency.step_mfu). Empty for a run
    without the count (a watched script, a run stopped in its warm-up, one stored before it)."""
    efficiency = run.summary.efficiency
    devices = efficiency.devices if efficiency else []
    rows = [[s.step, *(_percent(d.step_mfu(s.time_s)) for d in devices)] for s in run.steps]
    series = [Series(d.device, [r[0] for r in rows], [r[1 + i] for r in rows], palette.device_color(d.device, i))
              for i, d in enumerate(devices)]
    return EFFICIENCY.with_data(title=EFFICIENCY.title + run.of_steps, series=series,
                                marks=warmup_marks(run.warmup, run.steps),
                                columns=["step", *(f"MFU {d.device} (%)" for d in devices)], rows=rows)


def _percent(share: float | None) -> float | None:
    return None if share is None else share * 100


def batch_split_figure(steps: Sequence[Step], devices: list[str]) -> Figure:
    split_steps = [s for s in steps if s.batch_split]
    width = max(len(s.batch_split) for s in split_steps)
    names = (list(devices) + [f"device {i}" for i in range(len(devices), width)])[:width]
    rows = [[s.step] + [s.batch_split[i] if i < len(s.batch_split) else None for i in range(width)]
            for s in split_steps]
    # devices often get the same count: dashes, and a wide first line, keep every line visible where they overlap
    series = [Series(d, [r[0] for r in rows], [r[1 + i] for r in rows], palette.device_color(d, i),
                     dash=i, width=3.2 if i == 0 else 1.6) for i, d in enumerate(names)]
    return BATCH_SPLIT.with_data(series=series, columns=["step"] + [f"batch {d} (samples)" for d in names],
                                 rows=rows)


def busy_figure(summary: RunSummary, devices: list[str]) -> Figure:
    busy = summary.devices_busy
    names = list(summary.devices or devices)[:len(busy)]
    rows = [[d, b * 100, 100 - b * 100] if is_number(b) else [d, None, None] for d, b in zip(names, busy, strict=False)]
    return BUSY.with_data(title=f"{BUSY.title} · bubble {pct(summary.bubble.measured)}",
                          bars=Bars([r[0] for r in rows], [r[1] for r in rows]),
                          columns=["device", "busy (%)", "idle (%)"], rows=rows)


def tensor_memory_figure(devices: Sequence[str], memories: Sequence[TensorMemory | None]) -> Figure:
    """What the run's tensors held on each device, stacked by kind ("other" where a GPU's allocator or fsdp's
    tracked step says it, TensorMemory.other; that step's peak by torch's kinds in the table's "step peak" columns),
    where the process's memory is mostly torch itself. From a summary, or live from the last reports."""
    shown = [(d, m) for d, m in zip(devices, memories, strict=False) if m is not None]
    # "other" only where every bar has it: on CPU only fsdp's tracked step says it, and ddp's bar beside it
    # would look lighter for what it was not asked.
    kinds = [k for k in MEMORY_KINDS if k != "other" or (shown and all(m.other is not None for _, m in shown))]

    def mib(m: TensorMemory, kind: str):
        value = getattr(m, kind)
        return None if value is None else value / MIB
    # fsdp's tracked step, by torch's kinds, in the table (the bars' "other" is its transient part).
    peak_kinds = list(dict.fromkeys(k for _, m in shown for k in m.step_peak or {}))
    rows = [[d, *(mib(m, k) for k in kinds), m.total / MIB + (mib(m, "other") or 0.0),
             m.allocated_peak / MIB if m.allocated_peak is not None else None,
             *((m.step_peak or {}).get(k, 0) / MIB if m.step_peak is not None else None for k in peak_kinds)]
            for d, m in shown]
    segments = [Segment(k, [r[1 + i] for r in rows], palette.MEMORY_COLORS[k]) for i, k in enumerate(kinds)]
    return TENSOR_MEMORY.with_data(bars=Bars([r[0] for r in rows], [r[1 + len(kinds)] for r in rows],
                                             segments=segments),
                                   columns=["device", *(f"{k} (MiB)" for k in kinds), "total (MiB)",
                                            "allocator peak (MiB)",
                                            *(f"{PEAK_PREFIX}{k} (MiB)" for k in peak_kinds)], rows=rows)


def communication_figure(devices: Sequence[str], comms: Sequence[Communication | None]) -> Figure:
    """Each device's collectives per measured step, stacked by operation; their time in the table."""
    shown = [(d, c) for d, c in zip(devices, comms, strict=False) if c is not None]
    operations = [op for op in OPERATIONS if any(t.operation == op for _, c in shown for t in c.traffic)]
    rows = []
    for d, c in shown:
        by_op = {t.operation: t for t in c.traffic}
        rows.append([d, *(by_op[op].bytes / MIB if op in by_op else None for op in operations), c.bytes / MIB,
                     *(by_op[op].calls if op in by_op else None for op in operations),
                     c.seconds * 1e3 if c.seconds is not None else None])
    segments = [Segment(op, [r[1 + i] for r in rows], palette.OPERATION_COLORS.get(op, palette.OTHER_KIND))
                for i, op in enumerate(operations)]
    return COMMUNICATION.with_data(
        bars=Bars([r[0] for r in rows], [r[1 + len(operations)] for r in rows], segments=segments),
        columns=["device", *(f"{op} (MiB)" for op in operations), "total (MiB)",
                 *(f"{op} (calls)" for op in operations), "time (ms)"], rows=rows)


# ---- runs compared -----------------------------------------------------------------------
def comparison_figures(runs: Sequence[RunView]) -> list[Figure]:
    """Several runs over each other: a colour per run, a dash per device, the utilization means alone
    (the raw samples of several runs are noise). Each run is named by what sets it apart (run_names.py)."""
    names = run_names([run.config for run in runs], [run.label for run in runs], [run.summary for run in runs])
    util, memory, throughput, loss, efficiency = [], [], [], [], []
    for r, (run, name) in enumerate(zip(runs, names, strict=True)):
        color = palette.series_color(r)
        for d, mfu_series in enumerate(efficiency_figure(run).series):
            efficiency.append(dataclasses.replace(mfu_series, name=f"{name} {mfu_series.name}", color=color, dash=d))
        for d, device in enumerate(run.devices):
            t, values, spans = _measured(run, device, "util", 1.0)
            if t:
                util.append(telemetry_series(f"{name} {device}", t, trailing_mean(t, values), spans, color, dash=d))
            t, values, spans = _measured(run, device, "mem_used", 1 / MIB)
            if t:
                memory.append(telemetry_series(f"{name} {device}", t, values, spans, color, dash=d))
        for curves, key in ((throughput, "throughput"), (loss, "loss")):
            steps = [s for s in run.steps if getattr(s, key) is not None]
            if steps:
                curves.append(Series(name, [s.step for s in steps], [getattr(s, key) for s in steps], color))
    of_runs = f" · {len(runs)} runs"
    return [frame.with_data(title=frame.title + of_runs, series=series,
                            **dict(zip(("columns", "rows"), series_table(series, frame.x, frame.y), strict=True)))
            for frame, series in ((UTILIZATION, util), (MEMORY, memory), (THROUGHPUT, throughput), (LOSS, loss),
                                  (EFFICIENCY, efficiency))]
