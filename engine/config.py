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
from typing import Any

from engine import models, strategies
from engine.precision import DEFAULT_LR, DTYPES, OPTIMIZERS
from engine.problems import ConfigError, Problem  # noqa: F401 (part of this module's interface)

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


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    strategy: str = "single"
    """Name from the strategy registry (engine.strategies.STRATEGIES)."""
    model: str = "mlp"
    """Name from the model zoo (engine.models.MODELS), "torchvision:NAME", or "custom" with model_file."""
    model_file: str | None = None
    """A .py file defining build_model() and make_batch(batch_size, generator)."""
    image_size: int | None = None
    """torchvision models: height and width of the synthetic images; None: the size its weights expect."""
    split_level: int = 1
    """Any-module models: split points at the model's children (1) or one level deeper (2)."""
    width: int = 512
    """mlp: features of each hidden Linear."""
    depth: int = 8
    """mlp: number of Linear+ReLU blocks before the head."""
    devices: str = "auto"
    """"auto", "cpu:N" (N virtual devices), "cuda:0,cuda:1", or a mix such as "cpu,cuda:0"."""
    split: tuple[int, ...] | None = None
    """Index of the first block of each later stage; None: the balanced split."""
    micro_batches: int | None = None
    """Pipeline: micro-batches per step (the batch must divide evenly)."""
    split_size: int | None = None
    """Pipeline, the tutorial's way: samples per micro-batch (micro_batches = batch / split_size)."""
    schedule: str = "gpipe"
    """Pipeline schedule: a name from engine.strategies.schedules (gpipe, 1f1b, interleaved1f1b, ...)."""
    stages_per_device: int | None = None
    """Pipeline: stages each device runs (V); None: the schedule's default (1 for gpipe and 1f1b, else 2)."""
    batch_size: int | None = None
    """Global batch per step; None: the model's default."""
    steps: int = 20
    """Optimizer steps to run."""
    warmup: int = 2
    """Leading steps left out of the summary's timings."""
    seed: int = 0
    """Seeds the initial parameters and the synthetic data: every strategy sees the same batches."""
    lr: float | None = None
    """The optimizer's learning rate; None: the model's default for SGD, torch's default (1e-3) for AdamW."""
    hang_timeout_s: float = 120.0
    """A rank silent this long is declared hung and the run fails."""
    input_prep: str = "ahead"
    """Batches prepared before the first step ("ahead") or drawn inside each step ("in-step"): engine.run.feed."""
    profile_steps: int = 0
    """Measured steps each rank records with torch.profiler (engine.measure.profiling); 0: none."""
    timeline: str = "sampled"
    """Which steps keep their intervals in the store: "sampled" (a bounded sample) or "all"
    (engine.record.timeline_keeper)."""
    optimizer: str = "sgd"
    """The optimizer every strategy builds (engine.precision.OPTIMIZERS): "sgd" or "adamw"."""
    dtype: str = "float32"
    """The forward's compute dtype (engine.precision.DTYPES): "float32", or "bfloat16" under torch.autocast."""
    nodes: str | None = None
    """Machines to run on, each with a node agent: "ADDR:PORT,ADDR:PORT" (engine.nodes); None: this machine.
    Every node runs ``devices``; ranks go node by node in address order."""
    token_file: str | None = None
    """The file with the token the nodes' agents share (engine.nodes.token); None: the default location."""

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
                values[key] = _coerce(key, value)
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
            if key in _FIELD_TYPES:
                try:
                    values[key] = _coerce(key, value)
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


# Each option's type and whether it may be null, read from the annotations above: declared once.
_FIELD_TYPES = {name: _base_and_optional(hint) for name, hint in typing.get_type_hints(ExperimentConfig).items()}


def _coerce(key: str, value: Any) -> Any:
    base, optional = _FIELD_TYPES[key]
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
