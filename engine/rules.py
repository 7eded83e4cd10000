"""What the registries decide about a config: the values the engine takes where an option is left to it, and
what is wrong with a config on its own (no model built, no torch).

engine.config is plain data and imports no registry; this module asks the strategies, models and
precisions for it (each value is its registry's rule: ``Strategy.micro_batches``, ``models.effective_batch_size``,
``precision.effective_lr``). The checks that need the model's blocks or the devices live in
``engine.run.validate``; a strategy's own rules in its ``option_problems``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from engine import models, strategies
from engine.config import ExperimentConfig, out_of_bounds
from engine.cores import parse_cores
from engine.models import effective_batch_size  # noqa: F401 (each value the engine chooses, from here)
from engine.precision import DTYPES, OPTIMIZERS, effective_lr  # noqa: F401
from engine.problems import Problem


def effective_micro_batches(config: ExperimentConfig) -> int:
    """Micro-batches per step, by the strategy's rule (engine.strategies.strategy); 1 for an unknown one."""
    known = strategies.STRATEGIES.get(config.strategy)
    return known.micro_batches(config) if known else 1


def effective_stages_per_device(config: ExperimentConfig) -> int:
    """Stages per device, by the strategy's rule; 1 for an unknown one."""
    known = strategies.STRATEGIES.get(config.strategy)
    return known.stages_per_device(config) if known else 1


def watches_script(config: ExperimentConfig) -> bool:
    """The run is a user's own script (engine/strategies/script.py), not our model under a strategy."""
    known = strategies.STRATEGIES.get(config.strategy)
    return known is not None and not known.builds_model


def model_label(config: ExperimentConfig) -> str:
    """What the run trains, in a word: the model's name, "custom" for a model file, a watched script's file
    name (the summary's ``model``, the runs table's column)."""
    if watches_script(config):
        return config.script_module or (config.script or "").rsplit("/", 1)[-1]
    return config.model if not config.model_file else models.CUSTOM


# The registries an option's choices may name (engine/config.py's ``choices="schedules"``): name -> description.
REGISTRIES: dict[str, Callable[[], dict[Any, str]]] = {
    "strategies": lambda: {name: s.description for name, s in strategies.STRATEGIES.items()},
    "schedules": lambda: strategies.SCHEDULES,
    "split levels": lambda: models.SPLIT_LEVELS,
    "optimizers": lambda: OPTIMIZERS,
    "dtypes": lambda: DTYPES,
}


def declared_choices(f: dataclasses.Field) -> dict[Any, str] | None:
    """An option's choices (name -> description), read from its registry now where it names one; None where
    any value of its type goes."""
    choices = f.metadata["choices"]
    return REGISTRIES[choices]() if isinstance(choices, str) else choices


MOST_HANG_TIMEOUT_S = 7 * 24 * 3600.0   # longer waits overflow the timers that wait on it, failing late


def problems(config: ExperimentConfig) -> list[Problem]:
    """What is wrong with the config on its own (no model built, no torch)."""
    found: list[Problem] = []
    found.extend(_model_problems(config))
    found.extend(loader_problems(config))
    ours = not watches_script(config)
    found.extend(_size_problems(config))
    found.extend(_step_problems(config))
    if ours:
        found.extend(_script_only_problems(config))
    found.extend(node_problems(config))
    known = strategies.STRATEGIES.get(config.strategy)
    if known is not None:   # the options the strategy reads, by its own rules (and those it does not read)
        found.extend(known.option_problems(config))
    return found + _declared_problems(config, {p.option for p in found}, ours)


def _declared_problems(config: ExperimentConfig, named: set[str], ours: bool) -> list[Problem]:
    """Each option outside its declared choices or bounds (engine/config.py ``choices`` and ``bounds``: declared
    there, checked here for every option), unless a problem names it already (it does not apply, or needs
    another option first). A watched script's steps of 0 or fewer are its strategy's to judge (0: until it
    ends)."""
    found = []
    for f in dataclasses.fields(config):
        if f.name in named or (f.name == "steps" and not ours and config.steps <= 0):
            continue
        allowed, value = declared_choices(f), getattr(config, f.name)
        if allowed is not None and value is not None and value not in allowed:
            found.append(Problem(f.name, f"unknown value {value!r}; allowed: {_allowed_text(allowed)}"))
        elif f.metadata["bounds"] and (problem := out_of_bounds(config, f.name)) is not None:
            found.append(problem)
    return found


def _allowed_text(allowed: dict) -> str:
    """The names allowed; numbered ones (the split levels) with what each means, the number alone saying
    nothing."""
    if all(isinstance(name, int) for name in allowed):
        return "; ".join(f"{name}: {description}" for name, description in allowed.items())
    return ", ".join(map(str, allowed))


def _model_problems(config: ExperimentConfig) -> list[Problem]:
    """The model a known one, or a model file."""
    found: list[Problem] = []
    add = lambda option, message: found.append(Problem(option, message))  # noqa: E731
    if config.model_file is None:
        if models.lookup(config.model) is None:
            add("model", f"unknown model {config.model!r}; allowed: {', '.join(models.MODELS)}, "
                         f"{models.TORCHVISION}NAME (any torchvision classification model), or --model-file PATH")
    elif config.model not in (models.CUSTOM, "mlp"):
        # "mlp" is the default; a model file overrides it.
        add("model", "give either --model or --model-file, not both")
    return found


def _size_problems(config: ExperimentConfig) -> list[Problem]:
    """The image size and the split level given where they apply (their ranges and choices, and every other
    option's: ``_declared_problems``)."""
    found: list[Problem] = []
    add = lambda option, message: found.append(Problem(option, message))  # noqa: E731
    if config.image_size is not None and not models.torchvision_name(config.model):
        add("image_size", f"applies only to {models.TORCHVISION}NAME models, not {config.model}")
    if (config.split_level in models.SPLIT_LEVELS and config.split_level != 1 and config.model_file is None
            and config.model in models.MODELS):
        add("split_level", f"applies to {models.TORCHVISION}NAME models and model files; {config.model}'s split "
                           "points are its blocks")
    return found


def _step_problems(config: ExperimentConfig) -> list[Problem]:
    """The profiled steps, the warmup, the learning rate and the hang timeout: each in its range."""
    found: list[Problem] = []
    add = lambda option, message: found.append(Problem(option, message))  # noqa: E731
    first_profiled = config.warmup if config.profile_from is None else config.profile_from
    if (outside := out_of_bounds(config, "profile_steps")) is not None:
        found.append(outside)
    elif config.profile_from is not None and config.profile_from < 0:
        add("profile_from", f"must be a step, 0 or more, got {config.profile_from}")
    elif config.profile_from is not None and not config.profile_steps:
        add("profile_from", "applies with --profile-steps (the steps it records)")
    elif config.profile_steps and config.steps and config.profile_steps > config.steps - first_profiled:
        # a watched script's steps (config.steps 0) end when it does: whatever it reaches is recorded
        add("profile_steps", f"must be at most the steps from the first recorded ({first_profiled}) to the last "
                             f"({config.steps - 1}: --steps less one), got {config.profile_steps}")
    if config.warmup < 0:
        add("warmup", f"must be 0 or more, got {config.warmup}")
    elif config.steps >= 1 and config.warmup >= config.steps:
        add("warmup", f"must be less than --steps ({config.steps}) so some steps are measured, got {config.warmup}")
    if config.lr is not None and not 0 < config.lr < float("inf"):
        add("lr", f"must be a positive finite number, got {config.lr}")
    if not 0 < config.hang_timeout_s <= MOST_HANG_TIMEOUT_S:
        add("hang_timeout_s", f"must be more than 0 and at most {MOST_HANG_TIMEOUT_S:g} seconds (a week), got "
                              f"{config.hang_timeout_s:g}")
    return found


def _script_only_problems(config: ExperimentConfig) -> list[Problem]:
    """The options for a script of one's own, given with our model under a strategy."""
    found = [Problem(name, "applies only to a script of your own (--strategy script)")
             for name in ("script", "script_args", "script_cwd", "script_module", "samples_per_step")
             if getattr(config, name) not in (None, "")]
    if config.script_launch != ExperimentConfig().script_launch:
        found.append(Problem("script_launch", "applies only to a script of your own (--strategy script)"))
    return found


LOADER_OPTIONS = ("loader_workers", "loader_cores", "pin_memory", "prefetch_factor", "persistent_workers",
                  "decode_cost_ms")


def loader_problems(config: ExperimentConfig) -> list[Problem]:
    """The DataLoader's options (--input-prep loader, engine.run.loader): each in its range, and given only
    with the loader. The cores are checked against the machine's by engine.run.validate."""
    default = ExperimentConfig()
    if config.input_prep != "loader":
        return [Problem(name, "applies only with --input-prep loader") for name in LOADER_OPTIONS
                if getattr(config, name) != getattr(default, name)]
    found = []
    # torch's DataLoader refuses these without workers (they are about the workers)
    if config.prefetch_factor is not None and config.loader_workers < 1:
        found.append(Problem("prefetch_factor", "needs --loader-workers 1 or more (batches are prefetched by "
                                                "the workers)"))
    if config.persistent_workers and config.loader_workers < 1:
        found.append(Problem("persistent_workers", "needs --loader-workers 1 or more"))
    if config.loader_cores is not None:
        try:
            parse_cores(config.loader_cores)
        except ValueError as exc:
            found.append(Problem("loader_cores", str(exc)))
        if config.loader_workers < 1:
            found.append(Problem("loader_cores", "needs --loader-workers 1 or more (the cores are the workers')"))
        if config.nodes:
            found.append(Problem("loader_cores", "not with --nodes: on each node the workers take the cores its "
                                                 "devices leave"))
    return found


def node_problems(config: ExperimentConfig) -> list[Problem]:
    """``--nodes`` and its token file, checked without asking any node (engine.nodes.coordinator.preflight
    asks them)."""
    if not config.nodes:
        if config.token_file is not None:
            return [Problem("token_file", "applies only with --nodes")]
        return []
    from engine.nodes.cluster import config_problems
    from engine.nodes.token import TokenError, token_for
    found = config_problems(config)
    try:
        token_for(config.token_file)
    except TokenError as exc:
        found.append(Problem("token_file", str(exc)))
    return found
