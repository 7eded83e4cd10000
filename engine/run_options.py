"""The run options of the command line (``run``, and ``experiment``'s overrides), and the config they give.

Each option is ExperimentConfig's (engine/config.py declares its flag, help,
default and choices, read from the registries); ``config_from_args`` makes the
``ExperimentConfig`` every run is described by.
"""
from __future__ import annotations

import argparse
import os

from engine.config import ConfigError, ExperimentConfig, Option, Problem, options

# Options whose command-line default is "not given", for a rule that needs to know: the model (given
# with --model-file, which says its own) and the warm-up (fewer than 2 steps on a run of 2 or less).
NOT_GIVEN = ("model", "warmup")


def _help(o: Option) -> str:
    text = o.help
    if o.choices:
        text += ": " + "; ".join(f"{name}: {description}" for name, description in o.choices.items())
    if o.default is not None and "default" not in text:
        text += f" (default {o.default:g})" if isinstance(o.default, float) else f" (default {o.default})"
    return text


def add_run_options(p: argparse.ArgumentParser, *, for_experiment: bool = False) -> None:
    """Every option ExperimentConfig declares (engine/config.py: its flag, help and default there), and the
    run's own (telemetry rate, store, --json); for an experiment, those its base takes and with no defaults,
    so only what the user gave overrides the preset's."""
    g = p.add_argument_group("run options")
    for o in options():
        if for_experiment and not o.in_experiment:
            continue
        kind = {int: int, float: float}.get(o.type)   # text otherwise: --split takes indices or names
        default = argparse.SUPPRESS if for_experiment else None if o.name in NOT_GIVEN else o.default
        g.add_argument(o.flag, dest=o.name, metavar=o.flag[2:].upper().replace("-", "_"), default=default,
                       help=_help(o), **({"type": kind} if kind else {}))
    g.add_argument("--telemetry-hz", type=float, default=10.0, help="telemetry sampling rate, 0 < Hz <= 50")
    g.add_argument("--db", default=None, help="the run store (default: SPLITSCOPE_DB or the user data dir)")
    g.add_argument("--json", action="store_true", help="print only the summary as one JSON object")


def given_options(args) -> dict:
    """The config's options among ``args``, files made absolute (the checks and the ranks run with the
    project's folder as their working directory), the model "custom" where a file is given."""
    values = {}
    for o in options():
        if o.name in vars(args):
            value = getattr(args, o.name)
            values[o.name] = (os.path.abspath(value) if value else None) if o.path else value
    if values.get("model_file"):
        values["model"] = "custom"
    return values


def split_tokens(text: str) -> list[int | str]:
    """``--split 3,6`` or ``--split layer3``: block indices, or block names to resolve against the model."""
    tokens = [t.strip() for t in text.split(",")]
    if not all(tokens):
        raise ConfigError([Problem("split", f"must be block indices or names separated by commas, got {text!r}")])
    return [int(t) if t.lstrip("-").isdigit() else t for t in tokens]


def config_from_args(args) -> tuple[ExperimentConfig, list | None]:
    """The run's config, and its ``--split`` tokens when given (names are resolved against the model's
    blocks by validation, engine.run.validate.check_all)."""
    found: list[Problem] = []
    values = given_options(args)
    tokens = None
    if values.pop("split") is not None:
        try:
            tokens = split_tokens(args.split)
        except ConfigError as exc:
            found.extend(exc.problems)
    if args.model and args.model_file:
        found.append(Problem("model", "give either --model or --model-file, not both"))
    if not 0 < args.telemetry_hz <= 50:
        found.append(Problem("telemetry_hz", f"must be more than 0 and at most 50, got {args.telemetry_hz:g}"))
    if found:
        raise ConfigError(found)
    values["model"] = values["model"] or "mlp"
    if values["warmup"] is None:
        values["warmup"] = min(2, max(0, args.steps - 1))
    return ExperimentConfig(**values), tokens
