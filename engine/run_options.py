"""Each run option as the command line (``run``, and ``experiment``'s overrides) and the app's form show it,
and the config the command line's give.

Each option is ExperimentConfig's (engine/config.py declares its flag, help,
default and choices); ``options()`` reads the declarations, with the choices a
registry gives (the config imports none); ``config_from_args`` makes the
``ExperimentConfig`` every run is described by.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from engine.config import (
    OPTION_GROUPS,
    ConfigError,
    ExperimentConfig,
    Problem,
    bounds_text,
    declared_flag,
    field_types,
)
from engine.rules import declared_choices


@dataclass(frozen=True)
class Option:
    """One field of ExperimentConfig as the command line, the app's form (app/views/more_options.py) and an
    experiment's base (app/views/experiments_menu.py preset_base) show it."""
    name: str
    group: str                          # its concern (engine/config.py OPTION_GROUPS)
    type: type                          # int, float, bool, str, or tuple (the split's block indices)
    optional: bool                      # None allowed: the engine chooses
    default: Any
    help: str
    flag: str                           # "--hang-timeout"
    label: str                          # "hang timeout (s)": how the app's form names it
    choices: dict[Any, str] | None      # name -> description, where the value is one of some names
    bounds: tuple[float, float] | None  # the least and the most it may be (engine.rules refuses the rest)
    why: str                            # why the bounds are what they are, or what unit they count
    in_form: bool                       # the app's panel shows it among its further options
    in_experiment: bool                 # an experiment's base takes it from the run options
    path: bool                          # a file, made absolute


def options() -> list[Option]:
    """Every option, in declaration order, its choices read from the registries now."""
    out = []
    for f in dataclasses.fields(ExperimentConfig):
        meta = f.metadata
        base, optional = field_types(ExperimentConfig)[f.name]
        choices = declared_choices(f)
        out.append(Option(f.name, meta["group"], base, optional, f.default, meta["help"],
                          declared_flag(f), meta["label"] or f.name.replace("_", " "), choices, meta["bounds"],
                          meta["why"], meta["form"], meta["experiment"], meta["path"]))
    return out


# Options whose command-line default is "not given", for a rule that needs to know: the model (given
# with --model-file, which says its own) and the warm-up (fewer than 2 steps on a run of 2 or less).
NOT_GIVEN = ("model", "warmup")


def by_concern(found: list[Option]) -> list[Option]:
    """``found`` with each concern's options together, in ``OPTION_GROUPS``' order (declaration order within
    each): as `run --help` and the form's More options show them."""
    return sorted(found, key=lambda o: list(OPTION_GROUPS).index(o.group))


def _help(o: Option) -> str:
    text = o.help
    if o.choices:
        text += ": " + "; ".join(f"{name}: {description}" for name, description in o.choices.items())
    if o.bounds:
        text += "; " + bounds_text(o.bounds, o.why)
    if o.default is not None and "default" not in text and o.type is not bool:  # argparse says a switch's
        text += f" (default {o.default:g})" if isinstance(o.default, float) else f" (default {o.default})"
    return text


def add_run_options(p: argparse.ArgumentParser, *, for_experiment: bool = False,
                    leave_out: frozenset[str] = frozenset()) -> None:
    """Every option ExperimentConfig declares (engine/config.py: its flag, help and default there), and the
    run's own (telemetry rate, store, --json); for an experiment, those its base takes and with no defaults,
    so only what the user gave overrides the preset's. ``leave_out``: options the command decides itself
    (advise chooses the strategy, split and schedule)."""
    groups: dict[str, argparse._ArgumentGroup] = {}   # each concern's together, those with an option here
    for o in by_concern(options()):
        if (for_experiment and not o.in_experiment) or o.name in leave_out:
            continue
        if o.group not in groups:
            groups[o.group] = p.add_argument_group(f"{o.group} options", OPTION_GROUPS[o.group])
        g = groups[o.group]
        default = argparse.SUPPRESS if for_experiment else None if o.name in NOT_GIVEN else o.default
        if o.type is bool:   # --pin-memory, --no-pin-memory
            g.add_argument(o.flag, dest=o.name, default=default, help=_help(o), action=argparse.BooleanOptionalAction)
            continue
        kind = {int: int, float: float}.get(o.type)   # text otherwise: --split takes indices or names
        g.add_argument(o.flag, dest=o.name, metavar=o.flag[2:].upper().replace("-", "_"), default=default,
                       help=_help(o), **({"type": kind} if kind else {}))
    g = p.add_argument_group("recording")
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
    values["model"] = "mlp" if values["model"] is None else values["model"]   # --model "" is no model: refused
    if values["warmup"] is None:
        values["warmup"] = min(2, max(0, args.steps - 1))
    return ExperimentConfig(**values), tokens
