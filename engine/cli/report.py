"""Plain-text tables for the terminal: a run's summary, the stored runs, the devices."""
from __future__ import annotations

import os
import re
import time

from engine.devices import gpu_label
from engine.record import by_node, time_by_kind
from engine.results import ExperimentResult, RunSummary
from engine.rules import model_label


def _fmt(value, spec: str = ".3g", missing: str = "-") -> str:
    if value is None:
        return missing
    return format(value, spec)


def summary_table(s: RunSummary) -> str:
    """The run's summary, a row per figure; a run of many devices is read node by node (engine.record.by_node)."""
    if by_node.rolled_up(s):
        return _table(_rolled_up_rows(s))
    rows = _header_rows(s)
    rows += _run_rows(s)
    rows += _training_rows(s)
    rows += _memory_rows(s)
    rows += _step_rows(s)
    rows += finding_rows(s)
    if s.script is not None:
        rows += script_rows(s.script)
    if s.efficiency:
        first, *more = s.efficiency.lines()
        rows += [("efficiency", first), *(("", line) for line in more)]
    rows += _telemetry_rows(s)
    for note in s.notes:
        rows.append(("note", note))
    return _table(rows)


def _header_rows(s: RunSummary) -> list[tuple[str, object]]:
    """What ran: the run, its status, strategy, model, devices (and nodes), split and steps measured."""
    return [
        ("run", s.run_id),
        ("status", s.status),
        ("strategy", s.strategy + (f" ({s.schedule}, {s.micro_batches} micro-batches)" if s.micro_batches else "")),
        ("model", s.model),
        ("devices", ", ".join(s.devices)),
        *(("node", node.text()) for node in s.nodes or []),
        ("split", ",".join(map(str, s.split)) if s.split else "-"),
        ("steps measured", s.steps_measured),
    ]


def _training_rows(s: RunSummary) -> list[tuple[str, object]]:
    """The parameters' norm and change, each device's busy share (the engine's) and the optimizer."""
    rows: list[tuple[str, object]] = []
    if s.param_norm is not None:
        rows.append(("param norm", f"{s.param_norm:.6g}"))
    if s.param_change is not None:
        rows.append(("param change", f"{s.param_change:.6g} (how far training moved them)"))
    if s.devices_busy:
        rows.append(("busy (engine)", "  ".join(f"{d} {b:.0%}"
                                                for d, b in zip(s.devices, s.devices_busy, strict=False))))
    if s.optimizer:
        rows.append(("optimizer", f"{s.optimizer}, {s.dtype}"))
    return rows


def _memory_rows(s: RunSummary) -> list[tuple[str, object]]:
    """Each device's communication, its tensors' memory and their step peak."""
    rows: list[tuple[str, object]] = []
    if s.communication:
        rows.append(("communication", "  ".join(f"{d} {c.text()}"
                                                for d, c in zip(s.devices, s.communication, strict=False)
                                                if c is not None)))
    if s.tensor_memory:
        rows.append(("tensor memory", "  ".join(f"{d} {m.text()}"
                                                for d, m in zip(s.devices, s.tensor_memory, strict=False)
                                                if m is not None)))
        peaks = [f"{d} {m.step_peak_text()}" for d, m in zip(s.devices, s.tensor_memory, strict=False)
                 if m is not None and m.step_peak]
        if peaks:
            rows.append(("step peak", "  ".join(peaks) + " (torch's FSDPMemTracker, last warm-up step)"))
    return rows


def _step_rows(s: RunSummary) -> list[tuple[str, object]]:
    """The stages' balance, the bubble and each device's milliseconds per step by kind."""
    rows: list[tuple[str, object]] = []
    if s.stage_balance is not None:
        rows.append(("stage balance", f"{s.stage_balance:.2f} (least / most busy stage; 1 = even split)"))
    if s.bubble.measured is not None:
        theory = f" (theory {s.bubble.theory:.2f})" if s.bubble.theory is not None else ""
        rows.append(("bubble", f"{s.bubble.measured:.2f}{theory}"))
    if s.time_by_kind:
        first, *more = time_by_kind.table(s.time_by_kind)
        rows += [("ms per step", first), *(("", line) for line in more)]
    return rows


def _telemetry_rows(s: RunSummary) -> list[tuple[str, object]]:
    """What the telemetry saw (OS/NVML utilization, SM activity, other programs on the cores), where it ran."""
    rows: list[tuple[str, object]] = []
    tel = s.telemetry
    if tel and tel.util_mean:
        rows.append(("util (OS/NVML)", "  ".join(f"{d} {_fmt(u, '.0f')}%"
                                                 for d, u in zip(s.devices, tel.util_mean, strict=False))))
        if any(m is not None for m in tel.sm_active_mean):
            rows.append(("SM activity (GPM)", "  ".join(f"{d} {_fmt(m, '.0f')}%"
                                                        for d, m in zip(s.devices, tel.sm_active_mean, strict=False))))
        if any(o is not None for o in tel.other_mean):
            others = [f"{d} {_fmt(o, '.0f')}%" for d, o in zip(s.devices, tel.other_mean, strict=False)
                      if o is not None]
            rows.append(("others on cores", "  ".join(others)))
        rows.append(("samples", f"{tel.samples} at {tel.rate_hz} Hz"))
        if tel.disturbed:
            rows.append(("disturbed", tel.disturbed))
        if tel.disagreement:
            rows.append(("note", tel.disagreement))
    return rows


def finding_rows(s: RunSummary) -> list[tuple[str, object]]:
    """The findings a line each, most of the step first (engine/record/findings.py); a run stored before them has
    its one diagnosis line."""
    if not s.findings:
        return [("diagnosis", s.diagnosis)] if s.diagnosis else []
    return [("findings" if i == 0 else "", f"{f.severity}: {f.text} [{f.code}]") for i, f in enumerate(s.findings)]


def script_rows(facts) -> list[tuple[str, object]]:
    """What a watched script was read to be (engine/watch/script_facts.py)."""
    model = f"{facts.model} ({facts.parameters:,} parameters)" if facts.model and facts.parameters else facts.model
    rows = [("script's model", model)] if model else []
    if facts.optimizers:
        rows.append(("learning rate", ", ".join(f"{name} {lr:g}" if lr is not None else name
                                                for name, lr in zip(facts.optimizers, facts.lr, strict=False))))
    if facts.samples_source:
        rows.append(("samples from", facts.samples_source))
    if facts.micro_steps and facts.micro_steps > 1:
        rows.append(("backwards a step", f"{facts.micro_steps:g} (gradient accumulation, a pipeline's micro-batches, "
                                         "or several losses)"))
    if facts.unread:
        rows.append(("not read", facts.unread))
    return rows


def _table(rows: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _run_rows(s: RunSummary) -> list[tuple[str, object]]:
    """Step time, throughput and loss: the whole run's, however many devices."""
    rows: list[tuple[str, object]] = []
    if s.step_time_s:
        rows.append(("step time", f"{s.step_time_s.mean * 1000:.1f} ms ± {s.step_time_s.std * 1000:.1f}"))
    if s.throughput:
        rows.append(("throughput", f"{s.throughput.mean:.0f} samples/s ± {s.throughput.std:.0f}"))
    if s.loss:
        rows.append(("loss", f"{_fmt(s.loss.first, '.4f')} -> {_fmt(s.loss.last, '.4f')}"))
    return rows


def _rolled_up_rows(s: RunSummary) -> list[tuple[str, object]]:
    """A run of many devices: its whole-run figures as any run's, the per-device ones a line per node, and the
    devices that stand out."""
    rows: list[tuple[str, object]] = [
        ("run", s.run_id), ("status", s.status),
        ("strategy", s.strategy + (f" ({s.schedule}, {s.micro_batches} micro-batches)" if s.micro_batches else "")),
        ("model", s.model), ("devices", by_node.devices_text(s)), ("steps measured", s.steps_measured)]
    rows += _run_rows(s)
    if s.bubble.measured is not None:
        rows.append(("bubble", f"{s.bubble.measured:.2f}"))
    first, *more = by_node.node_table(s)
    rows += [("by node", first), *(("", line) for line in more)]
    first, *more = by_node.outlier_lines(s) or ["-"]
    rows += [("look here first", first), *(("", line) for line in more)]
    if s.diagnosis:
        rows.append(("diagnosis", s.diagnosis))
    if s.efficiency and s.efficiency.mfu is not None:
        rows.append(("efficiency", f"run MFU {s.efficiency.mfu:.1%}"))
    rows += [("per device", by_node.PER_DEVICE), *(("note", note) for note in s.notes)]
    return rows


def runs_table(runs) -> str:
    if not runs:
        return "no runs stored yet"
    lines = [f"{'id':<23} {'started':<16} {'status':<19} {'strategy':<15} {'model':<14} {'devices':<12} "
             f"{'step ms':>8} {'samples/s':>10}"]
    for r in runs:
        st = r.summary.step_time_s.mean if r.summary and r.summary.step_time_s else None
        tp = r.summary.throughput.mean if r.summary and r.summary.throughput else None
        cfg = r.config
        lines.append(
            f"{r.id:<23} {time.strftime('%Y-%m-%d %H:%M', time.localtime(r.started)):<16} {r.status:<19} "
            f"{cfg.strategy:<15} {model_label(cfg):<14} {cfg.devices:<12} "
            f"{_fmt(st * 1000 if st else None, '.1f'):>8} {_fmt(tp, '.0f'):>10}")
    return "\n".join(lines)


def device_inventory() -> dict:
    """``{"gpus": [...], "cpu": {...}}``: what ``main.py devices`` shows."""
    from engine.devices import usable_cores
    from engine.telemetry import gpu_inventory
    gpus = gpu_inventory.inventory()
    cores = usable_cores()
    return {
        "gpus": gpus,
        "cpu": {"cores": len(cores), "usable_cores": cores, "logical_cpus": os.cpu_count(),
                "virtual_devices": len(cores),
                "note": "each CPU virtual device (cpu:N) is one pinned core with one intra-op thread"},
    }


def devices_table(inv: dict) -> str:
    lines = []
    for g in inv["gpus"]:
        mem = g.memory_total
        size = f"  {mem / 2**30:.1f} GiB" if mem else ""
        lost = "  (lost)" if g.lost else ""
        lines.append(f"{gpu_label(g)}  {g.name or 'unknown GPU'}{size}  driver {g.driver_version or '?'}{lost}")
        fields = g.fields
        if fields:
            have = [k for k, v in fields.items() if v]
            missing = [k for k, v in fields.items() if not v]
            lines.append("    available: " + (", ".join(have) or "none"))
            if missing:
                lines.append("    not available: " + ", ".join(missing))
        lines += [f"    note: {note}" for note in g.notes]
    if not inv["gpus"]:
        lines.append("no CUDA GPUs (no NVIDIA driver, or none visible)")
    cpu = inv["cpu"]
    n = cpu["virtual_devices"]
    lines.append(f"cpu: {cpu['cores']} usable core{'s' if cpu['cores'] != 1 else ''} "
                 f"({', '.join(map(str, cpu.get('usable_cores') or []))}): --devices cpu:1 .. cpu:{n} "
                 f"gives virtual devices cpu:0 .. cpu:{n - 1}, each one pinned core with one intra-op thread")
    return "\n".join(lines)


def experiment_table(result: ExperimentResult) -> str:
    lines = [f"experiment {result.experiment_id}: {result.name} ({result.status})",
             f"{'point':<24} {'step ms':>9} {'± std':>8} {'pred ms':>8} {'samples/s':>10} {'± std':>8} "
             f"{'bubble':>7} {'balance':>7} {'MFU':>6} {'smp/J':>7}  runs"]
    said: dict[str, str] = {}   # an error already shown (its pids aside) -> the first point that failed so
    for p in result.points:
        if p.step_time_s is None:
            same = re.sub(r"pid \d+", "pid", p.error or "")
            first = said.setdefault(same, p.label)
            lines.append(f"{p.label:<24} failed: " + (p.error if first == p.label else f"as {first}"))
            continue
        st, tp = p.step_time_s, p.throughput
        tied = result.tied and p.label in (result.best, *result.tied)
        mark = "  <- best" if p.label == result.winner else "  <- tied" if tied else ""
        mark += "  (disturbed)" if p.disturbed else ""
        predicted = _fmt(p.predicted_step_s * 1000 if p.predicted_step_s else None, '.1f')
        lines.append(f"{p.label:<24} {st.mean * 1000:>9.1f} {st.std * 1000:>8.1f} {predicted:>8} {tp.mean:>10.0f} "
                     f"{tp.std:>8.0f} {_fmt(p.bubble.measured, '.2f'):>7} "
                     f"{_fmt(p.stage_balance, '.2f'):>7} {_fmt(p.mfu, '.1%'):>6} {_fmt(p.samples_per_joule, '.3g'):>7}"
                     f"  {len(p.run_ids)}{mark}")
    if result.tied:
        lines.append(result.verdict())
    lines += result.rankings()
    lines += [f"{p.label}: {p.disturbed}" for p in result.points if p.disturbed]
    if result.automatic_split is not None:
        lines.append(f"automatic balanced split: {result.automatic_split}")
    if any(p.tensor_memory for p in result.points):
        from engine.figures.experiment import memory_by_kind_figure
        figure = memory_by_kind_figure(result.name, result.points)
        lines.append("tensor memory per device (mean over a point's devices, its first run) and bytes moved:")
        lines.append(f"{figure.columns[0]:<24} " + " ".join(f"{c:>12}" for c in figure.columns[1:]))
        lines += [f"{row[0]:<24} " + " ".join(f"{_fmt(v, '.3g'):>12}" for v in row[1:]) for row in figure.rows]
    if any(p.predicted_step_s for p in result.points):
        lines.append("pred ms: the what-if's step time for the point, from the first micro-batched pipeline point's "
                     "first run (engine/planner/what_if.py)")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def predictions_table(predictions, under_run: str | None = None, summary=None) -> str:
    """The what-if lines (engine.planner.what_if): one per schedule, stages per device and micro-batch count;
    ``under_run`` (under that run's summary: GPipe and 1F1B): each schedule's fastest and the run's own, and how to
    see all; ``summary``: the run's, whose measured split-backward cost the zero-bubble schedules' lines carry."""
    from engine.planner.what_if import TRUST, TRUST_DETAIL, measured_inputs
    shown = list(predictions)
    if under_run:
        fastest = {}
        for p in predictions:
            if p.schedule not in fastest or p.step_time_s < fastest[p.schedule].step_time_s:
                fastest[p.schedule] = p
        shown = [p for p in predictions if p.measured or fastest[p.schedule] is p]
    lines = [f"what-if: {TRUST}:"]
    for p in shown:
        mark = "  <- this run (the fit)" if p.measured else ""
        lines.append(f"  {p.schedule:<15} V={p.stages_per_device} m={p.micro_batches:<3} step "
                     f"{p.step_time_s * 1e3:8.1f} ms  bubble {p.bubble:.2f}{mark}")
    if under_run:
        lines.append(f"  (each schedule's fastest; every schedule and micro-batch count: "
                     f"main.py what-if {under_run})")
    lines += [f"  {line}" for line in measured_inputs(summary, {p.schedule for p in shown})]
    if not under_run:   # the whole what-if: how far to trust it, in full
        lines.append(f"  ({TRUST_DETAIL})")
    return "\n".join(lines)
