"""What the status line, the live plots' title and the log say about a run, without Qt.

Each text is a function of the run's progress (``live_data.RunProgress``) or of how the
run ended (``engine.run.session.RunResult``), so a test reads them without a window.
"""
from __future__ import annotations

from app.state.live_data import RunProgress
from app.state.number_formats import format_duration
from engine.events import Errored, Log, Started, Warned, WorkerEvent
from engine.results import RunSummary
from engine.rules import model_label, watches_script
from engine.run.session import RunResult
from engine.strategies.script import plain


def short_id(run_id: str) -> str:
    """How the plots and the status line name a run: "182558" of "20250101-182558-ab12"."""
    return run_id.split("-")[1] if "-" in run_id else run_id


def what_runs(config) -> str:
    """What the status line says runs: the strategy ("model-parallel"), or a watched script by its file
    ("script ddp_train.py")."""
    return f"{config.strategy} {model_label(config)}" if watches_script(config) else config.strategy


def live_title(progress: RunProgress) -> str:
    """The live plots' title while a run goes: its label, strategy and devices (the configured ones until
    the ranks say which they got)."""
    label = progress.label or f"run {short_id(progress.run_id or '')}"
    devices = ", ".join(progress.devices) if progress.devices else progress.config.devices
    return f"Live: {label}, {what_runs(progress.config)} on {devices}"


def last_run_title(result: RunResult) -> str:
    """The live plots' title once the run ended: the machine's telemetry goes on."""
    return f"Live: this machine's telemetry · last run {short_id(result.run_id)} {result.status}"


def started_text(progress: RunProgress) -> str:
    return f"Running {what_runs(progress.config)} on {', '.join(progress.devices)}{_split(progress)}"


FIRST_RUN_NOTE = "the first run after start takes longer"


def starting_text(progress: RunProgress, first_run: bool = False) -> str | None:
    """What the run does between Run and its first step, from the protocol's ``launched`` and ``started``
    events (docs/protocol.md); None once steps come or when no run is starting. ``first_run``: the first
    run since the app started, whose worker may wait for the fork server to finish importing torch
    before its ranks exist (engine/forkserver; see RunFlow.runs_begun)."""
    if progress.steps_done or progress.status not in ("starting", "running"):
        return None
    if progress.status == "running":
        return "starting: every rank is ready, taking the first step…"
    if not progress.launched:
        return "starting: launching the worker" + (f" ({FIRST_RUN_NOTE})" if first_run else "") + "…"
    return "starting: the ranks build the model and meet…"


def starting_phase(progress: RunProgress) -> str | None:
    """``starting_text`` in a word or two, beside the progress bar of an experiment (which counts runs)."""
    if progress.steps_done or progress.status not in ("starting", "running"):
        return None
    if progress.status == "running":
        return "first step…"
    return "building…" if progress.launched else "launching…"


def starting_status(progress: RunProgress, first_run: bool = False) -> str | None:
    """The status line before the first step: "pipeline on cpu:2 · starting: the ranks build the model and
    meet…"."""
    text = starting_text(progress, first_run)
    if text is None:
        return None
    devices = ", ".join(progress.devices) if progress.devices else progress.config.devices
    return f"{what_runs(progress.config)} on {devices} · {text}"


def running_text(progress: RunProgress) -> str | None:
    """The status line while steps come in; None before the first."""
    if progress.status != "running" or not progress.steps_done:
        return None
    mean = sum(progress.step_times) / len(progress.step_times) if progress.step_times else 0.0
    bubble = progress.measured_bubble()
    rate = progress.throughput()
    extra = (f" · {rate:,.0f} samples/s" if rate else "") + (f" · bubble {100 * bubble:.0f}%" if bubble is not None
                                                              else "")
    of = f"/{progress.steps_total}" if progress.steps_total else ""   # 0: a watched script ends by itself
    return (f"Running {what_runs(progress.config)} on {', '.join(progress.devices)} · step "
            f"{progress.steps_done}{of} · {mean * 1000:.1f} ms/step{extra}")


def time_left_text(progress: RunProgress) -> str | None:
    """"≈ 3 s left" once a step's time is known; None before."""
    left = progress.time_left_s()
    if progress.status not in ("running", "starting") or left is None or not progress.steps_done:
        return None
    return f"≈ {format_duration(left)} left"


def finished_text(result: RunResult, progress: RunProgress, took_s: float) -> str:
    """How the run ended, for the status line: "Finished 20 steps in 3.1 s · 7.1 ms/step · 1,234 samples/s ·
    bubble 40%", "Stopped after 3 of 100 steps" or "Failed: <the cause>". ``progress``: the run's progress,
    for the steps it saw; ``took_s``: from Run to the end, as the user waited."""
    if result.status == "finished":
        summary = result.summary
        parts = [f"Finished {summary.steps if summary else progress.steps_done} steps in {format_duration(took_s)}"]
        if summary and summary.step_time_s:
            parts.append(f"{summary.step_time_s.mean * 1000:.1f} ms/step")
        if summary and summary.throughput:
            parts.append(f"{summary.throughput.mean:,.0f} samples/s")
        if summary and summary.bubble.measured is not None:
            parts.append(f"bubble {100 * summary.bubble.measured:.0f}%")
        return " · ".join(parts)
    if result.status == "stopped":
        of = f" of {progress.steps_total}" if progress.steps_total else ""   # 0: a watched script's own end
        return f"Stopped after {progress.steps_done}{of} steps"
    return f"Failed: {result.error or 'the run failed'}"


def event_log_line(event: WorkerEvent, progress: RunProgress) -> tuple[str, str] | None:
    """The Log's line for a worker event, with its level ("info", "warning", "error"); None for events the
    plots show (steps). ``progress``: the run's progress, after the event was applied to it."""
    match event:
        case Started():
            return f"started: devices {', '.join(progress.devices)}{_split(progress)}, pids {event.pids}", "info"
        case Log():   # what a rank printed (a watched script's own output): whose it is first
            return f"{_whose(event.rank, progress)}: {event.message}", "info"
        case Warned():
            return f"warning: {event.message}", "warning"
        case Errored():   # with the traceback of the rank that raised (a watched script's own, as python prints it)
            whose = _whose(event.rank, progress) if event.rank is not None else event.node or "the run"
            traceback = f"\n{event.traceback.rstrip()}" if event.traceback else ""
            return f"error ({whose}): {event.message}{traceback}", "error"
    return None


def _whose(rank: int | None, progress: RunProgress) -> str:
    """"rank 1", or "the script" for a script watched as one plain process (no ranks of its own)."""
    if watches_script(progress.config) and plain(progress.config):
        return "the script"
    return f"rank {rank}" if rank is not None else "the run"


def _split(progress: RunProgress) -> str:
    return f", split at {','.join(map(str, progress.split))}" if progress.split else ""


def measured_steps(summary: RunSummary) -> str:
    """What a finished run's busy shares and bubble cover: "the 18 measured steps" (the warm-up left out)."""
    n = summary.steps_measured
    return f"the {n:,} measured step{'s' if n != 1 else ''}" if n else "no measured step"


def covers_note(summary: RunSummary) -> str:
    """The bubble panel's line saying which steps its figures cover."""
    warmup = summary.steps - summary.steps_measured
    return (f"over {measured_steps(summary)}" + (f", after {warmup} of warm-up" if warmup > 0 else ""))


def measurement_notes(summary: RunSummary) -> list[str]:
    """What the summary says about how far its figures can be trusted, as the CLI prints them
    (engine/cli/report.py): others on the devices' cores, and the OS disagreeing with the engine."""
    telemetry = summary.telemetry
    if telemetry is None:
        return []
    return [note for note in (telemetry.disturbed and f"Disturbed: {telemetry.disturbed}.",
                              telemetry.disagreement) if note]


def mfu_peak_words(peak_used: str, efficiency=None) -> str:
    """What the MFU plot's percentages are of: "of the measured peak, 96.7 GFLOP/s" where every device has one
    figure, else "of each device's measured peak" (engine.results.efficiency: --peak measured or datasheet)."""
    from engine.results.efficiency import si
    peaks = {d.peak.flops_per_s for d in (efficiency.devices if efficiency else []) if d.peak is not None}
    if len(peaks) == 1:
        return f"of the {peak_used} peak, {si(peaks.pop(), 'FLOP/s')}"
    return f"of each device's {peak_used} peak"
