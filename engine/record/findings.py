"""What a run's figures say, as findings (docs/summary.md ``findings``): each one a code, how much it matters, the
words and the devices, ordered by how much of the step it explains. The summary's ``diagnosis`` is the first's
text. A figure that cannot be true (an MFU over 100 %, kinds longer than the step) is one of them, never a value.

The worker makes them from its summary (``findings``); the session adds what only the telemetry knows
(``with_telemetry``: another program on a device's core)."""
from __future__ import annotations

from engine.record.time_by_kind import exceeds_step
from engine.results import DeviceKinds, RunSummary
from engine.results.read_facts import Finding, ScriptFacts

NOTICEABLE = 0.1          # a share of the step worth a finding
UNCOUNTED_AT = 0.05       # operations without a FLOP formula worth saying, as a share of the counted step's time
SEVERE = 0.3              # a share that is the step's main story
BALANCED_AT = 0.8         # the least busy stage's work over the busiest's, under which the split is not balanced
ABOVE_THEORY = 0.05       # a bubble this far (and a fifth) over its schedule's theory is worth a finding
NEAR_LIMIT = 0.9          # a device's peak memory over its memory worth a finding (a "problem" from FULL)
FULL = 0.97
# What shortens an input wait, in the engine's own options (engine/config.py): the rank loading its batches itself
# (busy, "data"), then waiting for its loader's workers (idle, "data-wait").
ENGINE_LOAD_FIX = ("loader workers on cores of their own would load it beside the step (--input-prep loader "
                   "--loader-workers, --loader-cores), or a cheaper decode")
ENGINE_INPUT_FIX = ("more loader workers on cores of their own (--loader-workers, --loader-cores), pinned memory on "
                    "GPUs (--pin-memory), or a cheaper decode")


def findings(summary: RunSummary, *, script: bool, world: int,
             unformulated: dict[str, float] | None = None) -> list[Finding]:
    """The run's findings, most of the step first. ``script``: a watched script's (its own words, not our flags);
    ``world``: its processes; ``unformulated``: the counted step's seconds in operations without a FLOP formula
    (by operation, and ``"step"``: all of them)."""
    facts = summary.script
    found: list[Finding] = []
    kinds = summary.time_by_kind or []
    if summary.steps == 0 and script:
        found.append(_no_steps(summary.status, facts))
    communicated = _communicated(summary, kinds, script=script)
    for d in kinds:
        found += _device_findings(d, summary, script=script, facts=facts, communicated=communicated)
    found += _script_findings(summary, script=script, world=world, facts=facts, communicated=communicated)
    found += _flop_findings(summary, unformulated)
    found += [f for f in (unbalanced_stages(summary), bubble_above_theory(summary)) if f is not None]
    if not found or max(f.share for f in found) < NOTICEABLE:
        busy = min((1 - d.idle_share for d in kinds), default=None)
        if busy is not None:
            found.append(Finding("busy", "info", f"every device busy at least {pct(busy)} of each step",
                                 list(summary.devices), 0.0))
    return sorted(found, key=lambda f: -f.share)


def _communicated(summary: RunSummary, kinds: list[DeviceKinds], *, script: bool) -> bool:
    """Whether the run's devices exchanged anything: our strategies do between their devices by design; a script
    only where its hooks saw it."""
    return not script and len(summary.devices) > 1 or bool(summary.communication) or any(
        d.by_kind.get(k) or d.hidden.get(k) for d in kinds for k in ("communication", "wait", "transfer"))


def _device_findings(d: DeviceKinds, summary: RunSummary, *, script: bool, facts: ScriptFacts | None,
                     communicated: bool) -> list[Finding]:
    """One device's findings from its time by kind (``d``), in the order ``findings`` lists them."""
    found: list[Finding] = []
    # its input: loaded in its own process (busy, as its busy share counts it) or waited for from its loader's
    # workers (idle): each finding is that kind's share of the step (engine/measure/timing.py KIND_MEANING)
    loading, waiting = d.share("data"), d.share("data-wait")
    if loading >= NOTICEABLE:
        found.append(Finding("data_load", _severity(loading), f"{d.device} spends {pct(loading)} of each step "
                             "loading its data in its own process (busy on it, not waiting): "
                             f"{_load_fix(script, facts)}", [d.device], loading))
    if waiting >= NOTICEABLE:
        found.append(Finding("data_wait", _severity(waiting), f"{d.device} waits on data (its loader's worker "
                             f"processes) {pct(waiting)} of each step, idle meanwhile: "
                             f"{_input_fix(script, facts)}", [d.device], waiting))
    # waiting on a peer: an engine run's idle time (its timers cover its work) but its wait for data; a script's
    # timed waits (a pipeline stage's for its peer), its untimed Python being its own (other_time)
    waited = d.share("wait") if script else d.idle_share - waiting
    if communicated and len(summary.devices) > 1 and waited >= NOTICEABLE:
        share = waited
        why = "a pipeline stage's wait for its peer's activation or gradient" if script else \
            "the split, the schedule or a slower rank"
        found.append(Finding("peer_wait", _severity(share), f"{d.device} idles {pct(share)} of each step "
                             f"(waiting on a peer: {why})", [d.device], share))
    elif script and d.step_s > 0 and d.other_s / d.step_s >= NOTICEABLE:
        share = d.other_s / d.step_s
        found.append(Finding("other_time", "info", f"{d.device} spends {pct(share)} of each step outside the "
                             "model's calls, its backward and its optimizer (the script's own Python between "
                             "them: the loss, logging, clearing gradients)", [d.device], share))
    exchanged = d.share("communication")
    if exchanged >= NOTICEABLE:
        found.append(Finding("communication", _severity(exchanged), f"{d.device} communicates {pct(exchanged)} "
                             "of each step that no compute hides", [d.device], exchanged))
    total = sum(d.by_kind.values())
    if exceeds_step(d):
        found.append(Finding("kinds_exceed_step", "problem", f"{d.device}'s kinds add up to "
                             f"{1e3 * total:.1f} ms in a {1e3 * d.step_s:.1f} ms step: its work ran outside the "
                             "merged step's time (ranks whose k-th steps fall at other times), so its shares of "
                             "the step are not what they seem", [d.device], 1.0))
    evaluation = d.between_steps.get("eval", 0.0)
    if evaluation > 0 and d.step_s > 0:
        share = evaluation / (evaluation + d.step_s)
        found.append(Finding("eval_time", "info", f"{d.device} evaluated {1e3 * evaluation:.1f} ms per step "
                             f"between its steps ({pct(share)} of the run's time): not counted in the steps or "
                             "their time", [d.device], share))
    return found


def _script_findings(summary: RunSummary, *, script: bool, world: int, facts: ScriptFacts | None,
                     communicated: bool) -> list[Finding]:
    """A watched script's run-wide findings: ranks that never exchanged, steps without samples."""
    found: list[Finding] = []
    if script and world > 1 and summary.steps_measured and not communicated:
        found.append(Finding("independent_ranks", "warning", f"{world} ranks and not one collective or "
                             "point-to-point call between them that the watch times (torch.distributed's, DDP's, "
                             "FSDP's, tensor parallel's, pipelining's): each trained its own copy of the model, "
                             "unless they exchange some other way. Check that the script forms a process group "
                             "(init_process_group) and wraps its model (DDP, FSDP) under torchrun, and the flags it "
                             "needs for that", list(summary.devices), 1.0))
    if script and summary.steps_measured and summary.throughput is not None and summary.throughput.mean == 0:
        unread = facts.unread if facts is not None else None
        found.append(Finding("no_samples", "warning", "0 samples a step: the model's inputs held no tensor with a "
                             "batch dimension" + (f" ({unread})" if unread else "") + ", and the script did not say "
                             "(watch.step(samples=...) or --samples-per-step): throughput is not measured",
                             list(summary.devices), 0.5))
    return found


def unbalanced_stages(summary: RunSummary) -> Finding | None:
    """A split whose stages' work, as measured, is not even (``stage_balance`` under BALANCED_AT): the busiest
    stage sets the pace of every step. A split balanced by the blocks' profiled times can be one of these."""
    busy = summary.stage_busy
    if summary.stage_balance is None or summary.stage_balance >= BALANCED_AT or not busy \
            or len(busy) != len(summary.devices):
        return None
    most, least = busy.index(max(busy)), busy.index(min(busy))
    busiest, idlest = summary.devices[most], summary.devices[least]
    share = busy[most] - busy[least]
    return Finding("unbalanced_stages", _severity(share), f"the split's stages are not balanced: {busiest} works "
                   f"{pct(busy[most])} of each step, {idlest} {pct(busy[least])}; the busiest stage sets the pace, so "
                   f"a split that moves blocks from {busiest} toward {idlest} shortens the step (the blocks' "
                   "profiled times, which a balanced split is made from, are not the run's)", [busiest, idlest],
                   share)


def bubble_above_theory(summary: RunSummary) -> Finding | None:
    """A measured bubble well over its schedule's theory: idle time the formula does not count."""
    measured, theory = summary.bubble.measured, summary.bubble.theory
    if measured is None or theory is None or measured - theory < max(ABOVE_THEORY, theory / 5):
        return None
    formula = f" ({summary.bubble.formula})" if summary.bubble.formula else ""
    schedule = f"{summary.schedule}'s" if summary.schedule else "the split's"
    return Finding("bubble_above_theory", _severity(measured - theory), f"the bubble is {pct(measured)} where "
                   f"{schedule} theory says {pct(theory)}{formula}: the {pct(measured - theory)} more is idle time "
                   "the formula does not count (stages of unequal work, the exchange between them, the optimizer's "
                   "step, a slower rank)", list(summary.devices), measured - theory)


def memory_near_limit(summary: RunSummary, limits: dict[str, int]) -> list[Finding]:
    """A device whose memory at its peak (the telemetry's) came near all it has (``limits``: bytes per device, a
    GPU's memory or the machine's RAM): a larger batch or model would not fit. CPU devices share the machine's
    RAM, so theirs are counted together."""
    telemetry = summary.telemetry
    peaks = dict(zip(summary.devices, telemetry.mem_peak_bytes, strict=False)) if telemetry is not None else {}
    cpus = [d for d in summary.devices if d.rpartition("/")[2].startswith("cpu") and peaks.get(d) and limits.get(d)]
    groups = [[d] for d in summary.devices if d not in cpus and peaks.get(d) and limits.get(d)]
    found = []
    for group in groups + ([cpus] if cpus else []):
        used, limit = sum(peaks[d] for d in group), max(limits[d] for d in group)
        if used < NEAR_LIMIT * limit:
            continue
        whose = f"{group[0]}'s memory" if len(group) == 1 else f"the RAM {', '.join(group)} share"
        found.append(Finding("memory_near_limit", "problem" if used >= FULL * limit else "warning",
                             f"{', '.join(group)} used {used / 2 ** 30:.2f} GiB of {whose} ({limit / 2 ** 30:.2f} "
                             f"GiB, {pct(used / limit)}) at the peak: a larger batch or model would not fit",
                             list(group), 0.5 if used >= FULL * limit else 0.2))
    return found


def with_telemetry(summary: RunSummary, memory_limits: dict[str, int] | None = None) -> RunSummary:
    """The summary with the telemetry's findings (``disturbed``: another program on a device's core; with
    ``memory_limits``, bytes per device, ``memory_near_limit``) among the rest, and its diagnosis the first
    finding's text."""
    listed = list(summary.findings) + memory_near_limit(summary, memory_limits or {})
    if summary.telemetry is not None and summary.telemetry.disturbed:
        listed.append(Finding("disturbed", "warning", summary.telemetry.disturbed, list(summary.devices), 0.05))
    cpu = summary.recording_cpu_s
    step = summary.step_time_s.mean if summary.step_time_s else None
    if cpu and step:
        total = sum(cpu.values())
        parts = ", ".join(f"{name} {1e3 * seconds:.2f}" for name, seconds in cpu.items())
        listed.append(Finding("recording_cpu", "info", f"recording the run took {1e3 * total:.2f} ms of CPU a step "
                              f"({parts} ms), {pct(total / step)} of one core beside the ranks: on CPU devices it "
                              "shares their cores", [], 0.0))
    listed.sort(key=lambda f: -f.share)
    return summary.replace(findings=listed, diagnosis=listed[0].text if listed else summary.diagnosis)


def _no_steps(status: str, facts: ScriptFacts | None) -> Finding:
    code = facts.exit_code if facts is not None else None
    how = "failed (its error is the run's)" if status == "failed" else \
        f"exited with status {code}" if code is not None else f"was {status}"
    tail = facts.output_tail if facts is not None else []
    said = ("; its last output: " + " | ".join(tail[-5:])) if tail else "; it printed nothing"
    return Finding("no_steps", "problem", f"the script {how} before its first step: nothing was measured{said}",
                   [], 1.0)


def _load_fix(script: bool, facts: ScriptFacts | None) -> str:
    """What takes the loading off the rank's own process, in the words of what the user can change."""
    if not script:
        return ENGINE_LOAD_FIX
    loader = facts.loader if facts is not None else None
    if loader is None:
        return ("the script makes its batches itself, outside any DataLoader: a DataLoader with num_workers > 0 "
                "would make them beside the step")
    return (f"DataLoader workers would load it beside the step (num_workers, now {loader.num_workers}), "
            "or a cheaper __getitem__")


def _input_fix(script: bool, facts: ScriptFacts | None) -> str:
    """What shortens the wait for the loader's workers, in the words of what the user can change."""
    if not script:
        return ENGINE_INPUT_FIX
    loader = facts.loader if facts is not None else None
    if loader is None:   # its settings unread (a DataLoader of its own kind)
        return "more DataLoader workers (num_workers), a larger prefetch_factor, or a cheaper __getitem__"
    fixes = [f"more DataLoader workers (num_workers, now {loader.num_workers})"]
    if not loader.pin_memory:
        fixes.append("pin_memory=True on GPUs")
    if loader.num_workers and not loader.persistent_workers:
        fixes.append("persistent_workers=True (workers kept between epochs)")
    if loader.num_workers:
        fixes.append(f"a larger prefetch_factor (now {loader.prefetch_factor or 2})")
    return ", ".join(fixes) + ", or a cheaper __getitem__"


def _flop_findings(summary: RunSummary, unformulated: dict[str, float] | None) -> list[Finding]:
    found = []
    efficiency = summary.efficiency
    for d in efficiency.devices if efficiency is not None else []:
        if d.over_peak is not None:
            peak = d.peak
            found.append(Finding("mfu_over_peak", "problem", f"{d.device}'s MFU would be {pct(d.over_peak)}: more "
                                 "than the device can do, so it is not shown. Either the FLOP count is too high (an "
                                 "operation's formula counts work it does not do) or the peak is too low "
                                 f"({peak.source if peak else 'none'})", [d.device], 1.0))
    step = (unformulated or {}).get("step", 0.0)
    if step > 0:
        missing = sorted(((op, s) for op, s in unformulated.items() if op != "step"), key=lambda item: -item[1])
        share = sum(s for _, s in missing) / step
        if share > UNCOUNTED_AT:
            ops = ", ".join(f"{op} {pct(s / step)}" for op, s in missing[:4])
            found.append(Finding("uncounted_flops", "warning", f"{pct(share)} of the counted step's time went to "
                                 f"operations without a FLOP formula ({ops}): their FLOPs are not in the count, so "
                                 "MFU is understated", list(summary.devices), share))
    return found


def pct(share: float) -> str:
    """A share as the summary's words say it: "70 %"."""
    return f"{100 * share:.0f} %"


def _severity(share: float) -> str:
    return "problem" if share >= SEVERE else "warning"

