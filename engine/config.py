"""``ExperimentConfig``: one run, described the same way everywhere.

The GUI builds it, the CLI parses into it, the worker receives it as JSON and the
store saves it. Plain data: it imports no registry. What the registries decide (the
values the engine takes where an option is left open, and what is wrong with a
config on its own) is ``engine.rules``; how the command line and the app show each
option, ``engine.run_options``.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any

from engine.problems import FLAGS, ConfigError, Problem  # noqa: F401 (part of this module's interface)
from engine.wire import codec

# How each step gets its batch (engine.run.feed does it; named here so the config needs no torch).
INPUT_PREP = {
    "ahead": "batches prepared before the first step and placed on the devices that read them, as a "
             "DataLoader with prefetching delivers them: the measured step holds the model's work only",
    "in-step": "each step draws a fresh batch on the host (timed as data) and copies it to the devices",
    "loader": "a torch DataLoader reads the samples, decoding and augmenting each (JPEG images for image models, "
              "--decode-cost of CPU work for any), on --loader-workers worker processes: the rank's wait for "
              "its next batch is timed as data (engine.run.loader)",
}
# Which peak FLOP/s a device's MFU is against (engine.measure.peak finds both).
PEAK_SOURCES = {
    "measured": "a matrix multiply's best on the device itself, in the run's dtype (measured once a machine)",
    "datasheet": "the GPU maker's dense figure for the dtype (known GPUs; a CPU device keeps the measured one)",
}
# How a watched script is started (engine/strategies/script.py, engine/watch/bootstrap.py).
SCRIPT_LAUNCHES = {
    "torchrun": "a rank per device, as torchrun starts them (RANK, WORLD_SIZE, ... set; one pinned core and one "
                "thread per CPU device)",
    "python": "one plain process, exactly as `python SCRIPT.py` runs it: no torchrun variables, every core and "
              "torch's default threads (CPU), every visible GPU",
}
# What a run stores of its steps' intervals (engine.record.timeline_keeper keeps them).
TIMELINE_MODES = {
    "sampled": "every step's summary row; the intervals of the first and last 200 steps, an even sample "
               "between and the outliers",
    "all": "every step's intervals (about 8 KB a step for a pipeline: gigabytes an hour)",
}


# The concerns the options fall in (``_option``'s ``group``), in the order the command line's help and the form's
# further options show them: name -> what its options decide.
OPTION_GROUPS = {
    "placement": "how training is spread: the strategy, the devices, the split and the nodes",
    "model": "what is trained: the model and its size",
    "pipeline": "a pipeline's micro-batches and schedule",
    "training": "the batch, the steps and the optimizer",
    "input": "how each step gets its batch (the DataLoader's options with --input-prep loader)",
    "measurement": "what is recorded, and when a rank is declared hung",
    "script": "a script of your own (--strategy script; `main.py watch` is the short way)",
}


def _option(default: Any, help: str, *, group: str, flag: str | None = None, label: str | None = None,
            choices: dict[str, str] | str | None = None, bounds: tuple[float, float] | None = None,
            why: str = "", form: bool = False, experiment: bool = True, path: bool = False) -> Any:
    """An ExperimentConfig field and how the command line and the app show it (``engine.run_options.options``
    reads it): ``help``, ``group`` (its concern, one of ``OPTION_GROUPS``), ``flag`` (default ``--`` and the
    name with dashes), ``label`` (the form's, default the
    name in words), ``choices`` (name -> description, or the name of a registry in
    ``engine.rules.REGISTRIES``: this module imports none), ``bounds`` (the least and the most it may be,
    both allowed: ``engine.rules`` refuses a value outside them, saying so with ``why``, and the form's box
    stops at them), ``form`` (the app's panel shows it among its
    further options: the options with no control of their own there), ``experiment`` (an experiment's base
    takes it: not the strategy, which each point sets, nor the nodes, which experiments do not use), ``path``
    (a file, made absolute: the ranks run in the project's folder)."""
    assert group in OPTION_GROUPS, f"group {group!r} is none of OPTION_GROUPS"
    return dataclasses.field(default=default, metadata={
        "help": help, "group": group, "flag": flag, "label": label, "choices": choices, "bounds": bounds, "why": why,
        "form": form, "experiment": experiment, "path": path})


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """One run. Each field is an option declared once: its type and default here, its help, flag and where it
    shows in ``_option`` (the command line's options, the app's form and an experiment's base follow)."""
    strategy: str = _option("single", "how training is spread over the devices", choices="strategies",
                            experiment=False, group="placement")
    model: str = _option("mlp", "a built-in model (`models` lists them), or torchvision:NAME for any torchvision "
                                "classification model (`models --torchvision` lists them)", group="model")
    model_file: str | None = _option(None, "a .py file with build_model() returning any nn.Module and "
                                           "make_batch(batch_size, generator)", path=True, group="model")
    image_size: int | None = _option(None, "torchvision models: image height and width (default: the size its "
                                           "weights expect)", bounds=(1, 4096), group="model")
    split_level: int = _option(1, "any-module models: how deep in the module tree the split points are",
                               choices="split levels", group="model")
    width: int = _option(512, "mlp: features of each hidden Linear", bounds=(1, 16384), group="model")
    depth: int = _option(8, "mlp: Linear+ReLU blocks before the head", bounds=(1, 512), group="model")
    devices: str = _option("auto", '"auto", "cpu:N" (N virtual devices, one pinned core each), "cuda:0,cuda:1", '
                                   'or a mix such as "cpu,cuda:0"', group="placement")
    split: tuple[int, ...] | None = _option(
        None, "first block (or submodule) of each later stage, by index or name, e.g. 5, 3,6, layer3 or "
              "layers.2,layers.4 (for a chain of blocks, layer3 means its first block, layer3.0); "
              "default: the balanced split", group="placement")
    micro_batches: int | None = _option(None, "pipeline: micro-batches per step (the batch must divide evenly)",
                                        group="pipeline")
    split_size: int | None = _option(None, "pipeline: samples per micro-batch (the tutorial's way: micro-batches "
                                           "= batch / split size)", group="pipeline")
    schedule: str = _option("gpipe", "pipeline schedule", choices="schedules", group="pipeline")
    stages_per_device: int | None = _option(None, "pipeline: stages each device runs, V (default: 1 for gpipe "
                                                  "and 1f1b, 2 for the others; zbv and dualpipev run exactly 2, "
                                                  "placed in a V)", group="pipeline")
    batch_size: int | None = _option(None, "global batch per step (default: the model's)", bounds=(1, 1_000_000),
                                     group="training")
    steps: int = _option(20, "optimizer steps to run", bounds=(1, 10_000_000), group="training")
    warmup: int = _option(2, "leading steps left out of the summary's timings (default: 2, fewer on a run "
                             "of 2 steps or less)", group="training")
    seed: int = _option(0, "seeds the initial parameters and the synthetic data: every strategy sees the same "
                           "batches", form=True, group="model")
    lr: float | None = _option(None, "the optimizer's learning rate (default: the model's for SGD, torch's 1e-3 "
                                     "for AdamW)", label="learning rate", form=True, group="training")
    hang_timeout_s: float = _option(120.0, "seconds without progress before a rank is declared hung and the "
                                           "run fails", flag="--hang-timeout", label="hang timeout (s)", form=True,
                                    group="measurement")
    input_prep: str = _option("ahead", "how each step gets its batch (engine.run.feed)", choices=INPUT_PREP,
                              group="input")
    loader_workers: int = _option(0, "input prep loader: the DataLoader's worker processes (0, torch's default: "
                                     "the rank decodes each batch itself)", bounds=(0, 64), form=True, group="input")
    loader_cores: str | None = _option(None, "input prep loader: the cores its workers run on, e.g. 2,3 or 2-5 "
                                             "(default: the cores no device of the run holds)", form=True,
                                       group="input")
    pin_memory: bool = _option(False, "input prep loader: batches in page-locked memory, copied to GPUs "
                                      "asynchronously", form=True, group="input")
    prefetch_factor: int | None = _option(None, "input prep loader: batches each worker prepares ahead "
                                                "(default: torch's, 2)", bounds=(1, 64), form=True, group="input")
    persistent_workers: bool = _option(False, "input prep loader: workers kept between passes over the samples "
                                              "(else started again each pass, as torch's default does)", form=True,
                                       group="input")
    decode_cost_ms: float = _option(0.0, "input prep loader: CPU milliseconds of further work per sample, beside "
                                         "an image's JPEG decode and augmentation", flag="--decode-cost",
                                    label="decode cost (ms per sample)", bounds=(0, 1000), why="ms per sample",
                                    form=True, group="input")
    profile_steps: int = _option(0, "measured steps each rank records with torch.profiler, kept with the run "
                                    "and exported with `export --format trace` (default 0: none)", bounds=(0, 20),
                                 why="a profiled step's trace is large", form=True, group="measurement")
    profile_from: int | None = _option(None, "the first step --profile-steps records, counted from 0 (default: "
                                             "the first measured, --warmup)", group="measurement")
    timeline: str = _option("sampled", "which steps keep their intervals in the store "
                                       "(engine.record.timeline_keeper)", choices=TIMELINE_MODES, form=True,
                            group="measurement")
    optimizer: str = _option("sgd", "the optimizer every strategy builds", choices="optimizers", group="training")
    dtype: str = _option("float32", "the forward's compute dtype", choices="dtypes", group="training")
    peak: str = _option("measured", "the peak FLOP/s each device's MFU is against (both are shown)",
                        choices=PEAK_SOURCES, label="MFU against", form=True, group="measurement")
    nodes: str | None = _option(None, "run over several machines, each running `main.py node`: "
                                      "ADDR:PORT,ADDR:PORT (each node runs --devices; ranks go node by node in "
                                      "address order)", experiment=False, group="placement")
    token_file: str | None = _option(None, "with --nodes: the file holding the token the node agents share "
                                           "(default: SPLITSCOPE_NODE_TOKEN_FILE or ~/.config/splitscope/node-token, as `main.py node` "
                                           "reads it)", experiment=False, path=True, group="placement")

    script: str | None = _option(None, "strategy script: your own training script, run unmodified on each device "
                                       "as torchrun would start it (`main.py watch` is the short way)",
                                 experiment=False, path=True, group="script")
    script_args: str | None = _option(None, "strategy script: the script's own arguments, one shell-quoted string",
                                      experiment=False, group="script")
    script_cwd: str | None = _option(None, "strategy script: the folder it runs in, as the one torchrun is started "
                                           "in (default: the script's own)", experiment=False, path=True,
                                     group="script")
    script_launch: str = _option("torchrun", "strategy script: how it is started", choices=SCRIPT_LAUNCHES,
                                 experiment=False, group="script")
    script_module: str | None = _option(None, "strategy script, launched as python: a module to run as "
                                              "`python -m MODULE` instead of a script file", experiment=False,
                                        group="script")
    samples_per_step: int | None = _option(None, "strategy script: the samples each process's step trains on, "
                                                 "where the script does not say (watch.step) and its batches come "
                                                 "from no DataLoader (default: the first dimension of the model's "
                                                 "first tensor input)", bounds=(1, 100_000_000), experiment=False,
                                           group="script")

    # ---- JSON -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["split"] is not None:
            d["split"] = list(d["split"])
        return d

    def to_json(self) -> str:
        return codec.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
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
                values[key] = _coerce(field_types(cls)[key], value)
            except (TypeError, ValueError) as exc:
                found.append(Problem(key, str(exc)))
        if found:
            raise ConfigError(found)
        return cls(**values)

    @classmethod
    def from_stored(cls, data: Any) -> ExperimentConfig:
        """A config as any version of Splitscope stored it: an option this version does not know, or a value
        it cannot read, is left out (its default stands), so a stored run always opens."""
        values = {}
        for key, value in (data.items() if isinstance(data, dict) else ()):
            if key in field_types(cls):
                try:
                    values[key] = _coerce(field_types(cls)[key], value)
                except (TypeError, ValueError):
                    pass
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> ExperimentConfig:
        try:
            data = codec.loads(text, "a config")
        except codec.WireError as exc:
            raise ConfigError([Problem("config", f"not valid JSON: {exc.detail}")]) from None
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> ExperimentConfig:
        return dataclasses.replace(self, **changes)


def _base_and_optional(hint) -> tuple[type, bool]:
    """``int | None`` -> (int, True); ``tuple[int, ...] | None`` -> (tuple, True); ``str`` -> (str, False)."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else ()
    base = next((a for a in args if a is not type(None)), hint)
    return typing.get_origin(base) or base, type(None) in args


_TYPES: dict[type, dict[str, tuple[type, bool]]] = {}


def field_types(cls: type) -> dict[str, tuple[type, bool]]:
    """Each option's type and whether it may be null, read from the annotations above: declared once."""
    if cls not in _TYPES:
        _TYPES[cls] = {name: _base_and_optional(hint) for name, hint in typing.get_type_hints(cls).items()}
    return _TYPES[cls]


def bounds_of(name: str) -> tuple[float, float] | None:
    """The least and the most option ``name`` may be (``_option``'s ``bounds``), or None where it has none."""
    return _fields(ExperimentConfig)[name].metadata["bounds"]


def out_of_bounds(config: ExperimentConfig, name: str) -> Problem | None:
    """Option ``name``'s value outside its declared bounds, said with them ("must be from 1 to 512, got 0");
    None where it is within them or not given."""
    value, meta = getattr(config, name), _fields(type(config))[name].metadata
    least, most = meta["bounds"]
    if value is None or least <= value <= most:
        return None
    return Problem(name, f"must be {bounds_text(meta['bounds'], meta['why'])}, got {_number(value)}")


def bounds_text(bounds: tuple[float, float], why: str = "") -> str:
    """An option's declared bounds in words: "from 0 to 20 (a profiled step's trace is large)"."""
    return f"from {_number(bounds[0])} to {_number(bounds[1])}" + (f" ({why})" if why else "")


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@functools.cache
def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def declared_flag(f: dataclasses.Field) -> str:
    """The option's command-line flag: the declared one, else ``--`` and its name with dashes."""
    return f.metadata["flag"] or "--" + f.name.replace("_", "-")


# A problem names its option as the command line spells it (engine.problems, below this module).
FLAGS.update({f.name: declared_flag(f) for f in dataclasses.fields(ExperimentConfig)})


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
    if base is bool:
        if not isinstance(value, bool):
            raise TypeError(f"must be true or false, got {value!r}")
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
