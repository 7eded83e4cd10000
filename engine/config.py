"""``ExperimentConfig``: one run, described the same way everywhere.

The GUI builds it, the CLI parses into it, the worker receives it as JSON and the
store saves it. ``problems()`` checks everything that needs no model; the checks
that need the model's blocks live in ``engine.run.validate``.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable

from engine import models, strategies
from engine.precision import DEFAULT_LR, DTYPES, OPTIMIZERS
from engine.problems import FLAGS, ConfigError, Problem  # noqa: F401 (part of this module's interface)

# How each step gets its batch (engine.run.feed does it; named here so the config needs no torch).
INPUT_PREP = {
    "ahead": "batches prepared before the first step and placed on the devices that read them, as a "
             "DataLoader with prefetching delivers them: the measured step holds the model's work only",
    "in-step": "each step draws a fresh batch on the host (timed as data) and copies it to the devices",
}
# What a run stores of its steps' intervals (engine.record.timeline_keeper keeps them).
TIMELINE_MODES = {
    "sampled": "every step's summary row; the intervals of the first and last 200 steps, an even sample "
               "between and the outliers",
    "all": "every step's intervals (about 8 KB a step for a pipeline: gigabytes an hour)",
}


def _option(default: Any, help: str | Callable[[], str], *, flag: str | None = None, label: str | None = None,
            choices: Callable[[], dict[str, str]] | None = None, form: bool = False, experiment: bool = True,
            path: bool = False) -> Any:
    """An ExperimentConfig field and how the command line and the app show it (``options()`` reads it):
    ``help`` (text, or a function giving it from a registry), ``flag`` (default ``--`` and the name with
    dashes), ``label`` (the form's, default the name in words), ``choices`` (name -> description, from a
    registry), ``form`` (the app's panel shows it among its further options: the options with no control of
    their own there), ``experiment`` (an experiment's base takes it: not the strategy, which each point sets,
    nor the nodes, which experiments do not use), ``path`` (a file, made absolute: the ranks run in the
    project's folder)."""
    return dataclasses.field(default=default, metadata={
        "help": help, "flag": flag, "label": label, "choices": choices, "form": form, "experiment": experiment,
        "path": path})


def _strategies_help() -> str:
    return "; ".join(f"{i.name}: {i.description}" for i in strategies.STRATEGIES.values())


def _models_help() -> str:
    return (f"one of: {', '.join(models.MODELS)}, or {models.TORCHVISION}NAME for any torchvision classification "
            "model (`models --torchvision` lists them)")


def _token_help() -> str:
    from engine.nodes.token import DEFAULT_TEXT
    return f"with --nodes: the file holding the token the node agents share (default: {DEFAULT_TEXT})"


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """One run. Each field is an option declared once: its type and default here, its help, flag and where it
    shows in ``_option`` (the command line's options, the app's form and an experiment's base follow)."""
    strategy: str = _option("single", _strategies_help, experiment=False)
    model: str = _option("mlp", _models_help)
    model_file: str | None = _option(None, "a .py file with build_model() returning any nn.Module and "
                                           "make_batch(batch_size, generator)", path=True)
    image_size: int | None = _option(None, "torchvision models: image height and width (default: the size its "
                                           "weights expect)")
    split_level: int = _option(1, lambda: "any-module models: split points at " + " or ".join(
        f"{k}, {text}" for k, text in models.SPLIT_LEVELS.items()))
    width: int = _option(512, "mlp: features of each hidden Linear")
    depth: int = _option(8, "mlp: Linear+ReLU blocks before the head")
    devices: str = _option("auto", '"auto", "cpu:N" (N virtual devices, one pinned core each), "cuda:0,cuda:1", '
                                   'or a mix such as "cpu,cuda:0"')
    split: tuple[int, ...] | None = _option(
        None, "first block (or submodule) of each later stage, by index or name, e.g. 5, 3,6, layer3 or "
              "layers.2,layers.4 (for a chain of blocks, layer3 means its first block, layer3.0); "
              "default: the balanced split")
    micro_batches: int | None = _option(None, "pipeline: micro-batches per step (the batch must divide evenly)")
    split_size: int | None = _option(None, "pipeline: samples per micro-batch (the tutorial's way: micro-batches "
                                           "= batch / split size)")
    schedule: str = _option("gpipe", "pipeline schedule", choices=lambda: strategies.SCHEDULES)
    stages_per_device: int | None = _option(None, "pipeline: stages each device runs, V (default: 1 for gpipe "
                                                  "and 1f1b, 2 for the others; zbv and dualpipev run exactly 2, "
                                                  "placed in a V)")
    batch_size: int | None = _option(None, "global batch per step (default: the model's)")
    steps: int = _option(20, "optimizer steps to run")
    warmup: int = _option(2, "leading steps left out of the summary's timings (default: 2, fewer on a run "
                             "of 2 steps or less)")
    seed: int = _option(0, "seeds the initial parameters and the synthetic data: every strategy sees the same "
                           "batches", form=True)
    lr: float | None = _option(None, "the optimizer's learning rate (default: the model's for SGD, torch's 1e-3 "
                                     "for AdamW)", label="learning rate", form=True)
    hang_timeout_s: float = _option(120.0, "seconds without progress before a rank is declared hung and the "
                                           "run fails", flag="--hang-timeout", label="hang timeout (s)", form=True)
    input_prep: str = _option("ahead", "how each step gets its batch (engine.run.feed)", choices=lambda: INPUT_PREP)
    profile_steps: int = _option(0, "measured steps each rank records with torch.profiler, kept with the run "
                                    "and exported with `export --format trace` (default 0: none)", form=True)
    timeline: str = _option("sampled", "which steps keep their intervals in the store "
                                       "(engine.record.timeline_keeper)", choices=lambda: TIMELINE_MODES, form=True)
    optimizer: str = _option("sgd", "the optimizer every strategy builds", choices=lambda: OPTIMIZERS)
    dtype: str = _option("float32", "the forward's compute dtype", choices=lambda: DTYPES)
    nodes: str | None = _option(None, "run over several machines, each running `main.py node`: "
                                      "ADDR:PORT,ADDR:PORT (each node runs --devices; ranks go node by node in "
                                      "address order)", experiment=False)
    token_file: str | None = _option(None, _token_help, experiment=False, path=True)

    # ---- derived values -------------------------------------------------
    @property
    def effective_batch_size(self) -> int:
        if self.batch_size is not None:
            return self.batch_size
        known = models.lookup(self.model)
        return known.batch_size if known else 32

    @property
    def effective_lr(self) -> float:
        """The given lr; else AdamW's own default (torch's 1e-3), or the model's SGD rate."""
        if self.lr is not None:
            return self.lr
        if self.optimizer in DEFAULT_LR:
            return DEFAULT_LR[self.optimizer]
        known = models.lookup(self.model)
        return known.lr if known else 0.01

    @property
    def effective_micro_batches(self) -> int:
        """Micro-batches per step: 1 unless the strategy pipelines."""
        if self.strategy not in strategies.STRATEGIES or not strategies.STRATEGIES[self.strategy].uses_micro_batches:
            return 1
        if self.micro_batches is not None:
            return self.micro_batches
        if self.split_size:
            return max(1, -(-self.effective_batch_size // self.split_size))
        return 4

    @property
    def effective_stages_per_device(self) -> int:
        """Stages per device: 1 unless a pipeline's schedule places several on each."""
        known = strategies.SCHEDULE_INFO.get(self.schedule)
        if self.strategy not in strategies.STRATEGIES or not strategies.STRATEGIES[self.strategy].uses_micro_batches \
                or known is None:
            return 1
        return self.stages_per_device or known.stages_per_device[0]

    # ---- JSON -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["split"] is not None:
            d["split"] = list(d["split"])
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentConfig":
        """Build from a dict; unknown keys and wrong types raise ConfigError listing each."""
        if not isinstance(data, dict):
            raise ConfigError([Problem("config", "must be a JSON object")])
        known = {f.name: f for f in dataclasses.fields(cls)}
        found: list[Problem] = []
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                found.append(Problem(key, f"unknown option; known: {', '.join(known)}"))
                continue
            try:
                values[key] = _coerce(_field_types(cls)[key], value)
            except (TypeError, ValueError) as exc:
                found.append(Problem(key, str(exc)))
        if found:
            raise ConfigError(found)
        return cls(**values)

    @classmethod
    def from_stored(cls, data: Any) -> "ExperimentConfig":
        """A config as any version of Splitscope stored it: an option this version does not know, or a value
        it cannot read, is left out (its default stands), so a stored run always opens."""
        values = {}
        for key, value in (data.items() if isinstance(data, dict) else ()):
            if key in _field_types(cls):
                try:
                    values[key] = _coerce(_field_types(cls)[key], value)
                except (TypeError, ValueError):
                    pass
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> "ExperimentConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError([Problem("config", f"not valid JSON: {exc}")]) from None
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> "ExperimentConfig":
        return dataclasses.replace(self, **changes)


def _base_and_optional(hint) -> tuple[type, bool]:
    """``int | None`` -> (int, True); ``tuple[int, ...] | None`` -> (tuple, True); ``str`` -> (str, False)."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else ()
    base = next((a for a in args if a is not type(None)), hint)
    return typing.get_origin(base) or base, type(None) in args


_TYPES: dict[type, dict[str, tuple[type, bool]]] = {}


def _field_types(cls: type) -> dict[str, tuple[type, bool]]:
    """Each option's type and whether it may be null, read from the annotations above: declared once."""
    if cls not in _TYPES:
        _TYPES[cls] = {name: _base_and_optional(hint) for name, hint in typing.get_type_hints(cls).items()}
    return _TYPES[cls]


@dataclass(frozen=True)
class Option:
    """One field of ExperimentConfig as the command line (engine.run_options), the app's form
    (app/views/experiment_panel.py) and an experiment's base (engine.experiments.presets) show it."""
    name: str
    type: type                          # int, float, str, or tuple (the split's block indices)
    optional: bool                      # None allowed: the engine chooses
    default: Any
    help: str
    flag: str                           # "--hang-timeout"
    label: str                          # "hang timeout (s)": how the app's form names it
    choices: dict[str, str] | None      # name -> description, where the value is one of some names
    in_form: bool                       # the app's panel shows it among its further options
    in_experiment: bool                 # an experiment's base takes it from the run options
    path: bool                          # a file, made absolute


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def options() -> list[Option]:
    """Every option, in declaration order, its help and choices read from the registries now."""
    out = []
    for f in dataclasses.fields(ExperimentConfig):
        meta = f.metadata
        base, optional = _field_types(ExperimentConfig)[f.name]
        help_text, choices = meta["help"], meta["choices"]
        out.append(Option(f.name, base, optional, f.default, help_text() if callable(help_text) else help_text,
                          _flag(f), meta["label"] or f.name.replace("_", " "), choices() if choices else None,
                          meta["form"], meta["experiment"], meta["path"]))
    return out


# A problem names its option as the command line spells it (engine.problems, below this module).
FLAGS.update({f.name: _flag(f) for f in dataclasses.fields(ExperimentConfig)})


def _coerce(declared: tuple[type, bool], value: Any) -> Any:
    base, optional = declared
    if value is None:
        if optional:
            return None
        raise ValueError("must not be null")
    if base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"must be a whole number, got {value!r}")
        return value
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"must be a number, got {value!r}")
        return float(value)
    if base is str:
        if not isinstance(value, str):
            raise TypeError(f"must be a string, got {value!r}")
        return value
    if base is tuple:   # split: block indices
        if isinstance(value, int) and not isinstance(value, bool):
            return (value,)
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        raise TypeError(f"must be a list of block indices, got {value!r}")
    return value


def problems(config: ExperimentConfig) -> list[Problem]:
    """What is wrong with the config on its own (no model built, no torch)."""
    found: list[Problem] = []
    add = lambda option, message: found.append(Problem(option, message))  # noqa: E731

    if config.strategy not in strategies.STRATEGIES:
        add("strategy", f"unknown strategy {config.strategy!r}; allowed: {', '.join(strategies.STRATEGIES)}")
    if config.model_file is None:
        if models.lookup(config.model) is None:
            add("model", f"unknown model {config.model!r}; allowed: {', '.join(models.MODELS)}, "
                         f"{models.TORCHVISION}NAME (any torchvision classification model), or --model-file PATH")
    elif config.model not in (models.CUSTOM, "mlp"):
        # "mlp" is the default; a model file overrides it.
        add("model", "give either --model or --model-file, not both")
    if config.timeline not in TIMELINE_MODES:
        add("timeline", f"unknown value {config.timeline!r}; allowed: {', '.join(TIMELINE_MODES)}")
    if config.input_prep not in INPUT_PREP:
        add("input_prep", f"unknown value {config.input_prep!r}; allowed: {', '.join(INPUT_PREP)}")
    if config.optimizer not in OPTIMIZERS:
        add("optimizer", f"unknown optimizer {config.optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    if config.dtype not in DTYPES:
        add("dtype", f"unknown dtype {config.dtype!r}; allowed: {', '.join(DTYPES)}")
    if config.schedule not in strategies.SCHEDULES:
        add("schedule", f"unknown schedule {config.schedule!r}; allowed: {', '.join(strategies.SCHEDULES)}")
    for name, most in (("width", 16384), ("depth", 512), ("steps", 10_000_000)):
        value = getattr(config, name)
        if not 1 <= value <= most:
            add(name, f"must be from 1 to {most}, got {value}")
    if config.image_size is not None:
        if not models.torchvision_name(config.model):
            add("image_size", f"applies only to {models.TORCHVISION}NAME models, not {config.model}")
        elif not 1 <= config.image_size <= 4096:
            add("image_size", f"must be from 1 to 4096, got {config.image_size}")
    if config.split_level not in models.SPLIT_LEVELS:
        add("split_level", "allowed: " + "; ".join(f"{k}: {text}" for k, text in models.SPLIT_LEVELS.items())
            + f"; got {config.split_level}")
    elif config.split_level != 1 and config.model_file is None and config.model in models.MODELS:
        add("split_level", f"applies to {models.TORCHVISION}NAME models and model files; {config.model}'s split "
                           "points are its blocks")
    if config.batch_size is not None and not 1 <= config.batch_size <= 1_000_000:
        add("batch_size", f"must be from 1 to 1000000, got {config.batch_size}")
    if not 0 <= config.profile_steps <= 20:
        add("profile_steps", f"must be from 0 to 20 (a profiled step's trace is large), got {config.profile_steps}")
    elif config.profile_steps > config.steps - config.warmup:
        add("profile_steps", f"must be at most the measured steps ({config.steps - config.warmup}: --steps less "
                             f"--warmup), got {config.profile_steps}")
    if config.warmup < 0:
        add("warmup", f"must be 0 or more, got {config.warmup}")
    elif config.steps >= 1 and config.warmup >= config.steps:
        add("warmup", f"must be less than --steps ({config.steps}) so some steps are measured, got {config.warmup}")
    if config.lr is not None and not config.lr > 0:
        add("lr", f"must be a positive number, got {config.lr}")
    if not config.hang_timeout_s > 0:
        add("hang_timeout_s", f"must be a positive number of seconds, got {config.hang_timeout_s}")

    found.extend(node_problems(config))
    known = strategies.STRATEGIES.get(config.strategy)
    if known is not None:   # the options the strategy reads, by its own rules (and those it does not read)
        found.extend(known.option_problems(config))
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
