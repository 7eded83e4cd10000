"""What the findings panel lists for a run: its findings (engine/record/findings.py) first, most of the step
first, then what to know to read its figures (the run's notes, its nodes, its tensors, its time by kind), each
with the devices it names and the figure it comes from ("why"). No Qt: app/views/findings_panel.py draws them.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.record.findings import memory_near_limit
from engine.record.time_by_kind import exceeds_step
from engine.results import NodeSummary, RunSummary, TensorMemory
from engine.results.read_facts import Finding


@dataclass(frozen=True)
class Why:
    """The figure a finding is read from: its name (a plot's figure name, "bubble", or a Memory tab figure) and
    where in it to look."""
    figure: str
    words: str


@dataclass(frozen=True)
class FindingRow:
    code: str                 # the finding's, or "note" for what is no finding
    severity: str             # "problem", "warning", "info"
    text: str
    devices: list[str] = field(default_factory=list)
    why: Why | None = None


TIMELINE = "timeline"
MEMORY_TAB = ("tensor-memory", "communication")   # figures of the Memory tab, not the Plots tab
# The notes that say why no formula gives the bubble (engine.record.summary.why_no_theory): the bubble box's.
THEORY_NOTES = ("no theoretical bubble", "no closed-form bubble")
MOST_KIND_DEVICES = 4   # devices the time-by-kind line names
# Where each finding's figure is and what in it says so.
WHY = {
    "data_load": Why(TIMELINE, "the timeline: the data intervals of each step on that device's lane"),
    "data_wait": Why(TIMELINE, "the timeline: the thin data-wait bands of each step on that device's lane"),
    "peer_wait": Why(TIMELINE, "the timeline: the idle gaps on that device's lane, and its busy share at its left"),
    "other_time": Why(TIMELINE, "the timeline: the gaps between the model's calls, its backward and its optimizer"),
    "communication": Why(TIMELINE, "the timeline: the communication intervals no compute overlaps"),
    "kinds_exceed_step": Why(TIMELINE, "the timeline: that device's intervals reach outside the merged step"),
    "eval_time": Why(TIMELINE, "the timeline: the eval intervals between the steps"),
    "busy": Why(TIMELINE, "the timeline: each device's busy share at the left of its lane"),
    "unbalanced_stages": Why(TIMELINE, "the timeline: the stages' busy shares at the left of their lanes"),
    "independent_ranks": Why("communication", "the Memory tab's communication per device: no collective"),
    "no_samples": Why("throughput", "the throughput plot: no samples counted, so no curve"),
    "mfu_over_peak": Why("efficiency", "the MFU plot: that device's curve is left out, as it would be over 100 %"),
    "uncounted_flops": Why("efficiency", "the MFU plot: its curves count only the operations with a formula"),
    "disturbed": Why("utilization", "the utilization plot: the core's total (all programs, dashed) above the "
                                    "device's own work"),
    "recording_cpu": Why("utilization", "the utilization plot: the cores' totals beside the run's own work"),
    "bubble_above_theory": Why("bubble", "the bubble box: measured against the schedule's theory"),
    "memory_near_limit": Why("memory", "the memory plot: that device's memory used at its peak"),
    "time_by_kind": Why(TIMELINE, "the timeline: each kind's intervals in its colour"),
}


def summary_rows(summary: RunSummary, memory_limits: dict[str, int] | None = None,
                 live_notes: Iterable[str] = ()) -> list[FindingRow]:
    """A finished (or stored) run's rows: its findings, those the app adds (memory near its limit, from the
    telemetry's ``memory_limits`` where the session did not say it), then its notes."""
    found = list(summary.findings)
    if not any(f.code == "memory_near_limit" for f in found):
        found += memory_near_limit(summary, memory_limits or {})
    found.sort(key=lambda f: -f.share)
    rows = [finding_row(f) for f in found]
    telemetry = summary.telemetry
    if telemetry is not None and telemetry.disturbed and not any(f.code == "disturbed" for f in found):
        rows.append(finding_row(Finding("disturbed", "warning", telemetry.disturbed, list(summary.devices))))
    if not found and summary.diagnosis:   # a run stored before findings: its diagnosis
        rows.append(FindingRow("diagnosis", "info", summary.diagnosis, list(summary.devices), WHY["busy"]))
    if telemetry is not None and telemetry.disagreement:
        rows.append(FindingRow("note", "info", telemetry.disagreement, [], WHY["disturbed"]))
    kinds = time_by_kind_text(summary)
    if kinds:
        rows.append(FindingRow("time_by_kind", "info", kinds, list(summary.devices), WHY["time_by_kind"]))
    return rows + note_rows([*summary.notes, *live_notes], summary.nodes or [],
                            zip(summary.devices, summary.tensor_memory or [], strict=False))


def live_rows(notes: Iterable[str], nodes: list[NodeSummary],
              tensors: Iterable[tuple[str, TensorMemory | None]]) -> list[FindingRow]:
    """A running run's rows: no findings yet (the summary brings them), what to know to read it."""
    return note_rows(notes, nodes, tensors)


def note_rows(notes: Iterable[str], nodes: list[NodeSummary],
              tensors: Iterable[tuple[str, TensorMemory | None]]) -> list[FindingRow]:
    rows = [FindingRow("note", "info", note) for note in notes if note and not note.startswith(THEORY_NOTES)]
    rows += [FindingRow("node", "info", node.text()) for node in nodes]
    rows += [FindingRow("tensors", "info", f"tensors {device}: {memory.text()}", [device],
                        Why("tensor-memory", "the Memory tab's tensor memory by kind"))
             for device, memory in tensors if memory is not None]
    return rows


def theory_notes(notes: Iterable[str]) -> list[str]:
    """The notes that say why no formula gives this run's bubble: the bubble box shows them, not the panel."""
    return [note for note in notes if note.startswith(THEORY_NOTES)]


def finding_row(finding: Finding) -> FindingRow:
    return FindingRow(finding.code, finding.severity, finding.text, list(finding.devices), WHY.get(finding.code))


def time_by_kind_text(summary: RunSummary) -> str | None:
    """"time by kind a step: cpu:0 data 98 %, forward 1 % · cpu:1 ...": each device's kinds, most first, over
    its step (a watched script's as an engine run's)."""
    parts = []
    devices = summary.time_by_kind or []
    for d in devices[:MOST_KIND_DEVICES]:
        if d.step_s <= 0:
            continue
        if exceeds_step(d):   # shares adding to more than the step are no figures: its finding says why
            parts.append(f"{d.device}: kinds add up to more than its step (see its finding)")
            continue
        shares = sorted(((kind, seconds / d.step_s) for kind, seconds in d.by_kind.items() if seconds > 0),
                        key=lambda item: -item[1])
        idle = [("idle", d.idle_share)] if d.idle_share >= 0.005 else []
        parts.append(f"{d.device} " + ", ".join(f"{kind} {100 * share:.0f} %" for kind, share in [*shares, *idle]
                                                if share >= 0.005))
    more = len(devices) - MOST_KIND_DEVICES
    if more > 0:   # a line, not a page: the timeline's hover and the outliers list have every device's
        parts.append(f"and {more} more devices (the timeline's hover says each)")
    return f"time by kind a step ({1e3 * devices[0].step_s:.1f} ms): " + " · ".join(parts) if parts else None


def memory_limits(samples: Iterable) -> dict[str, int]:
    """Each device's memory (a GPU's, or the machine's RAM for a CPU device) as its samples say it."""
    limits: dict[str, int] = {}
    for sample in samples:
        total = getattr(sample, "mem_total", None)
        if total:
            limits[sample.device] = max(limits.get(sample.device, 0), int(total))
    return limits


def labelled(name: str, rows: list[FindingRow]) -> list[FindingRow]:
    """Rows of one of several runs compared, each saying which run it is of."""
    return [FindingRow(r.code, r.severity, f"{name}: {r.text}", r.devices, r.why) for r in rows]
