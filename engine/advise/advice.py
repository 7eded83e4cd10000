"""The advice made of the ranking and its checks: the choice and the runner-up, why in words, how far to trust it,
and the ``main.py run`` arguments that run the choice.

The choice is the fastest checked candidate (unchecked: the fastest predicted). Candidates whose measured spread
reaches into the choice's are named tied with it, by the experiments' own rule (engine/experiments/reduction.py
``best_and_tied``); the prediction's error on each checked candidate is said, and a check that other programs
disturbed (TelemetrySummary.disturbed) is said to be so.
"""
from __future__ import annotations

from engine.advise.results import Advice, Candidate, Ranked, Ranking
from engine.advise.verify import Checks
from engine.config import ExperimentConfig
from engine.run_options import options

# The options advise chooses itself, or that a short check sets: `advise` takes none of them.
CHOSEN = frozenset({"strategy", "split", "micro_batches", "split_size", "schedule", "stages_per_device", "steps",
                    "warmup", "profile_steps", "profile_from", "nodes", "token_file", "script", "script_args",
                    "script_cwd", "script_launch", "script_module", "samples_per_step"})
MODEL_OPTIONS = ("model", "model_file", "width", "depth", "image_size", "split_level")


def advice(ranking: Ranking, checks: Checks, base: ExperimentConfig, elapsed_s: float) -> Advice:
    candidates = checks.candidates
    fitting = [r for r in candidates if r.prediction.fits]
    checked = sorted((r for r in fitting if r.measured and r.measured.step_s), key=lambda r: r.measured.step_s)
    # A candidate whose check failed is chosen only where every one that fits failed.
    runnable = [r for r in fitting if not (r.measured and r.measured.error)] or fitting
    choice = next((r for r in checked if r.label == checks.best), checked[0] if checked else runnable[0])
    others = [r for r in checked if r is not choice] or [r for r in runnable if r is not choice]
    runner_up = others[0] if others else None
    notes = []
    if checks.tied:
        notes.append(f"tied within the measured noise (each run's step-to-step spread): {choice.label} and "
                     + ", ".join(checks.tied))
    errors = [f"{r.label} {r.prediction_error:+.0%}" for r in checked if r.prediction_error is not None]
    if errors:
        notes.append("prediction error on the checked candidates (predicted against measured step): "
                     + ", ".join(errors))
    notes += [f"{r.label}'s check was disturbed: {r.measured.disturbed}" for r in checked if r.measured.disturbed]
    notes += [f"{r.label}'s check failed: {r.measured.error}" for r in fitting if r.measured and r.measured.error]
    if checks.stopped_by:
        notes.append(checks.stopped_by)
    if not checked:
        notes.append("no candidate was checked: the choice is the prediction's alone")
    return Advice(choice, runner_up, checks.tied if checks.best == choice.label else [],
                  _why(choice, runner_up, candidates, ranking), run_args(base, choice.candidate, ranking.batch_size),
                  candidates, notes, ranking.batch_size, ranking.memory_limit_bytes, ranking.memory_limit_source,
                  _probe_seconds(ranking), checks.seconds, elapsed_s)


def _why(choice: Ranked, runner_up: Ranked | None, candidates: list[Ranked], ranking: Ranking) -> str:
    """The choice's prediction in words, against the runner-up's, against one device alone, and what memory
    ruled out."""
    basis = "measured" if choice.measured and choice.measured.step_s else "predicted"
    lines = [f"{choice.label} is the fastest {basis}: {choice.prediction.why}."]
    if runner_up is not None:
        lines.append(f"The runner-up, {runner_up.label}, {_step_text(runner_up)}: {runner_up.prediction.why}.")
    single = next((r for r in candidates if r.candidate.strategy == "single"), None)
    if single is not None and single is not choice and single is not runner_up:
        lines.append(f"One device alone {_step_text(single)}.")
    too_big = [r for r in candidates if not r.prediction.fits]
    if too_big:
        lines.append(f"{len(too_big)} candidate(s) do not fit {ranking.memory_limit_bytes / 2**30:.3g} GiB a device "
                     f"({ranking.memory_limit_source}), among them {too_big[0].label}.")
    return " ".join(lines)


def _step_text(entry: Ranked) -> str:
    text = f"is predicted {entry.prediction.step_s * 1e3:.3g} ms a step"
    if entry.measured and entry.measured.step_s:
        text += f", measured {entry.measured.step_s * 1e3:.3g} ms"
    return text


def _probe_seconds(ranking: Ranking) -> float:
    return (ranking.model.seconds if ranking.model else 0.0) + (ranking.link.seconds if ranking.link else 0.0)


def run_args(base: ExperimentConfig, candidate: Candidate, batch_size: int) -> list[str]:
    """What ``main.py run`` takes to run ``candidate`` of this model (without ``run``, ``--json`` or ``--db``): the
    model's options, the devices, the batch, the strategy and its options, and every other option given that
    differs from its default."""
    args = model_args(base)
    args += ["--devices", candidate.devices, "--batch-size", str(batch_size), "--strategy", candidate.strategy]
    if candidate.split:
        args += ["--split", ",".join(map(str, candidate.split))]
    if candidate.schedule is not None:   # a pipeline's
        args += ["--schedule", candidate.schedule or "gpipe", "--micro-batches", str(candidate.micro_batches)]
        if (candidate.stages_per_device or 1) > 1:
            args += ["--stages-per-device", str(candidate.stages_per_device)]
    return args + other_args(base)


def model_args(base: ExperimentConfig) -> list[str]:
    """The model's options as the command line takes them."""
    args = ["--model-file", base.model_file] if base.model_file else ["--model", base.model]
    if not base.model_file and base.model == "mlp":
        args += ["--width", str(base.width), "--depth", str(base.depth)]
    if base.image_size is not None:
        args += ["--image-size", str(base.image_size)]
    if base.split_level != 1:
        args += ["--split-level", str(base.split_level)]
    return args


def other_args(base: ExperimentConfig) -> list[str]:
    """Every option of ``base`` that differs from its default, but the model's, the devices, the batch and those
    advise chooses (``CHOSEN``)."""
    args = []
    for option in options():
        if option.name in CHOSEN or option.name in MODEL_OPTIONS or option.name in ("devices", "batch_size"):
            continue
        value = getattr(base, option.name)
        if value == option.default:
            continue
        if option.type is bool:
            args.append(option.flag if value else "--no-" + option.flag[2:])
        elif value is not None:
            args += [option.flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return args
