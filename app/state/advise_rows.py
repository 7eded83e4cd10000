"""The Advise tab's words: its rows (the what-if table's columns: predicted, measured, the error), the progress that
advise's lines say, and what a row's "Use this" puts in the form. No Qt: app/views/advise_view.py draws the rows,
app/controllers/advise_flow.py applies the form's changes.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from app.state.number_formats import human_bytes
from engine.advise.results import Advice, Ranked
from engine.config import ConfigError, ExperimentConfig
from engine.run_options import add_run_options, config_from_args, options
from engine.strategies import STRATEGIES

COLUMNS = ["#", "candidate", "predicted", "measured", "error", "fits", "why", ""]
TIPS = ["the rank: those that fit memory first, fastest predicted first",
        "the strategy, and for a split its schedule, stages per device (V), micro-batches (m) and split points",
        "the step time advise predicts from its probe of the model and the devices",
        "the mean step of its check, a short run, with its step-to-step spread (the best few are checked)",
        "The prediction's error: (predicted − measured) / measured. + the prediction was slower than the run, "
        "− faster.",
        "whether it fits the memory limit on every device",
        "the prediction in words: the bubble, the communication, the memory"]
PIPELINE_OPTIONS = ("schedule", "micro_batches", "stages_per_device")
_CHECK = re.compile(r"check (\d+) of (\d+)")
_CHECKING = re.compile(r"checking the best (\d+)")


@dataclass(frozen=True)
class AdviseRow:
    entry: Ranked
    cells: list[str]              # one a column of COLUMNS but the last (the row's button)
    tips: dict[int, str]          # column -> tooltip
    role: str | None              # "choice", "runner-up", "tied" or None
    fits: bool                    # its "Use this" is offered only where it fits memory


def ms_text(seconds: float | None) -> str:
    """A step time in milliseconds, three figures (a tiny model's 1.23 ms, a large one's 1234 ms)."""
    if seconds is None:
        return ""
    ms = seconds * 1e3
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def rows_of(advice: Advice) -> list[AdviseRow]:
    """Every candidate, ranked as advise ranked them, the choice, the runner-up and those tied with it named."""
    return [_row(k, entry, advice) for k, entry in enumerate(advice.candidates, 1)]


def _row(rank: int, entry: Ranked, advice: Advice) -> AdviseRow:
    p, m = entry.prediction, entry.measured
    role = ("choice" if entry is advice.choice else "runner-up" if entry is advice.runner_up
            else "tied" if entry.label in advice.tied else None)
    measured, tips = "", {6: p.why, 5: f"{human_bytes(p.memory_bytes)} on its fullest device, the limit "
                                       f"{human_bytes(advice.memory_limit_bytes)} ({advice.memory_limit_source})"}
    if m is not None and m.step_s:
        measured = ms_text(m.step_s) + (f" ±{ms_text(m.step_std_s)}" if m.step_std_s else "")
        tips[3] = f"run {m.run_id}" + (f", disturbed: {m.disturbed}" if m.disturbed else "")
    elif m is not None:
        measured, tips[3] = "failed", f"its check failed: {m.error}"
    error = entry.prediction_error
    cells = [str(rank), entry.label + (f" · {role}" if role else ""), ms_text(p.step_s), measured,
             f"{100 * error:+.1f} %" if error is not None else "", "yes" if p.fits else "no", p.why]
    return AdviseRow(entry, cells, tips, role, p.fits)


def caption(advice: Advice, stopped: bool = False) -> str:
    """The line above the table: the choice, predicted and measured, and what advise did to find it."""
    choice = advice.choice
    measured = (f", measured {ms_text(choice.measured.step_s)}" if choice.measured and choice.measured.step_s
                else ", not checked")
    checked = sum(1 for r in advice.candidates if r.measured is not None and r.measured.step_s)
    how = "stopped" if stopped else "found"
    return (f"Advice ({how} in {advice.elapsed_s:.0f} s, batch {advice.batch_size}): {choice.label} on "
            f"{choice.candidate.devices}, predicted {ms_text(choice.prediction.step_s)} a step{measured}. "
            f"{len(advice.candidates)} candidates predicted, {checked} checked by short runs.")


def progress_of(line: str) -> tuple[int, int, str] | None:
    """One of advise's progress lines on stderr ("advise: ...") as the run box's bar shows it: (done, of how
    many, the text); of 0: a busy bar (the probe). None for any other line."""
    if not line.startswith("advise: "):
        return None
    text = "Advise: " + line.removeprefix("advise: ").rstrip(" .")
    check = _CHECK.search(text)
    if check:
        return int(check.group(1)) - 1, int(check.group(2)), text
    checking = _CHECKING.search(text)
    if checking and int(checking.group(1)) > 0:
        return 0, int(checking.group(1)), text
    return 0, 0, text


def failure_of(stderr_lines: list[str], code: int) -> str:
    """Why advise gave no answer: its last "error: " line (its bad input says one line each), else its last."""
    errors = [line.removeprefix("error: ") for line in stderr_lines if line.startswith("error: ")]
    if errors:
        return "; ".join(errors)
    return stderr_lines[-1] if stderr_lines else f"exit status {code}"


@dataclass(frozen=True)
class FormChoice:
    """What "Use this" puts in the form: the panel's options (ExperimentPanel.apply_changes) and the split."""
    changes: dict
    split: tuple[int, ...] | None
    config: ExperimentConfig      # the choice's run_args, as `main.py run` reads them


def run_config(run_args: list[str]) -> tuple[ExperimentConfig, list | None]:
    """``run_args`` read by ``main.py run``'s own options (engine/run_options.py): its config and its split's
    tokens. ValueError saying why where they make none."""
    parser = argparse.ArgumentParser(prog="main.py run", add_help=False, exit_on_error=False)
    add_run_options(parser)
    try:
        return config_from_args(parser.parse_args(run_args))
    except argparse.ArgumentError as exc:
        raise ValueError(str(exc)) from None
    except ConfigError as exc:
        raise ValueError("; ".join(map(str, exc.problems))) from None
    except SystemExit:   # argparse exits on some errors whatever exit_on_error says
        raise ValueError(f"main.py run cannot read {' '.join(run_args)}") from None


def given_names(run_args: list[str]) -> list[str]:
    """The config's options that ``run_args`` give, in their order."""
    by_flag = {}
    for option in options():
        by_flag[option.flag] = option.name
        if option.type is bool:
            by_flag["--no-" + option.flag[2:]] = option.name
    names = [by_flag.get(arg.split("=", 1)[0]) for arg in run_args if arg.startswith("--")]
    return list(dict.fromkeys(name for name in names if name is not None))


def form_choice(advice: Advice, entry: Ranked) -> FormChoice:
    """The form for ``entry``: the choice's ``run_args`` (the model, the devices, the batch and every option advise
    was given) read as ``main.py run`` reads them, with ``entry``'s own strategy, devices, split, schedule,
    micro-batches and stages per device (the choice's are its run_args' own). ValueError where they read as no
    config."""
    config, _tokens = run_config(advice.run_args)
    changes = {name: getattr(config, name) for name in given_names(advice.run_args) if name != "split"}
    candidate = entry.candidate
    changes.update(strategy=candidate.strategy, devices=candidate.devices)
    for name in PIPELINE_OPTIONS:   # a pipeline's own: another strategy leaves the form's as they are
        changes.pop(name, None)
    strategy = STRATEGIES.get(candidate.strategy)
    if strategy is not None and strategy.uses_micro_batches:
        changes.update(schedule=candidate.schedule or "gpipe", micro_batches=candidate.micro_batches,
                       stages_per_device=candidate.stages_per_device)
    return FormChoice(changes, tuple(candidate.split) if candidate.split else None, config)
