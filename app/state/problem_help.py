"""The checks' problems in the app's words, each with the fixes the app can apply, without Qt.

The engine words a problem for the command line ("--devices: single uses exactly one device,
got 2"). The app names its own controls instead ("Single device runs on one device; Devices is
set to 2 CPU devices (cpu:0, cpu:1)") and, where one change of a setting mends it, offers that
change as a button ("Use 1 device"). The words and the fixes come from the config the problem
is about, not from parsing the engine's sentence, except where one option has two problems
(``micro_batches``: not dividing the batch, or too few for 1f1b).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from engine import devices as devices_mod
from engine.config import ExperimentConfig
from engine.problems import FLAGS, Problem
from engine.rules import effective_batch_size, effective_micro_batches
from engine.strategies import STRATEGIES

# The controls' names where the form's own rows name an option otherwise than it declares its label
# (``control_label``: the rest read as declared, "batch size" as "Batch size").
LABELS = {"micro_batches": "Micro-batches", "warmup": "Warm-up", "split": "Split points", "input_prep": "Input",
          "hang_timeout_s": "Hang timeout", "split_level": "Split at"}
TITLES = {"single": "Single device", "model-parallel": "Model-parallel", "pipeline": "Pipeline",
          "data-parallel": "Data-parallel", "ddp": "DDP"}
MOST_SPLIT_FIXES = 4   # a "keep only" button per split point, up to this many


@dataclass(frozen=True)
class Fix:
    """One change of the settings that mends a problem: the button's words and the config fields it sets."""
    label: str
    changes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Help:
    """A problem as the app shows it: the views, the Run rules and the window's sigChecked take these."""
    option: str
    message: str             # the engine's words (the command line's)
    text: str                # the app's words
    fixes: tuple[Fix, ...] = ()


def explain_all(problems: list[Problem], config: ExperimentConfig, *, gpus: int = 0,
                n_blocks: int | None = None, balanced: tuple[int, ...] | None = None) -> list[Help]:
    """``explain`` for each problem; ``gpus``: how many GPUs CUDA sees."""
    return [one_is_one(explain(p, config, gpus=gpus, n_blocks=n_blocks, balanced=balanced)) for p in problems]


# The nouns a count names, plural and singular: "use at most 1 devices" read as a slip.
SINGULAR = {"devices": "device", "stages": "stage", "blocks": "block", "micro-batches": "micro-batch",
            "split points": "split point", "GPUs": "GPU", "cores": "core", "steps": "step", "ranks": "rank",
            "nodes": "node"}
ONE_OF_MANY = re.compile(r"(?<![\d.,])\b1 (" + "|".join(map(re.escape, SINGULAR)) + r")\b")


def one_is_one(help_: Help) -> Help:
    """The problem's words and its fixes' with "1 devices" read "1 device" (the engine's messages and ours count
    with a plural whatever the number)."""
    def fix(text: str) -> str:
        return ONE_OF_MANY.sub(lambda m: f"1 {SINGULAR[m.group(1)]}", text)
    return Help(help_.option, help_.message, fix(help_.text),
                tuple(Fix(fix(f.label), f.changes) for f in help_.fixes))


def explain(problem: Problem, config: ExperimentConfig, *, gpus: int = 0, n_blocks: int | None = None,
            balanced: tuple[int, ...] | None = None) -> Help:
    """One problem of ``config`` (engine.problems) in the app's words, with its fixes."""
    option, message = problem.option, problem.message
    devices = _devices(config, gpus)
    strategy = STRATEGIES.get(config.strategy)
    staged = bool(strategy and strategy.uses_split)
    title = TITLES.get(config.strategy, config.strategy)
    said = f"Devices is set to {devices_mod.describe(devices)}" if devices else ""
    if option == "devices" and devices:
        if strategy and strategy.devices_needed(config) == 1 and len(devices) != 1:   # single's
            return Help(option, message, f"{title} runs on one device; {said}.",
                        (Fix("Use 1 device", {"devices": _one_device(devices)}),))
        if staged and len(devices) < 2:
            return Help(option, message, f"{title} puts each stage on a device of its own, so it needs 2 or "
                                         f"more; {said}.", _fixes_of([_devices_fix(2, devices, gpus)]))
        if staged and n_blocks is not None and len(devices) > n_blocks:
            return Help(option, message, f"The model has {n_blocks} blocks, so at most {n_blocks} stages; {said}.",
                        _fixes_of([_devices_fix(n_blocks, devices, gpus)]))
    if option == "split" and staged and config.split is not None and devices \
            and len(config.split) + 1 != len(devices):
        k, stages = len(config.split), len(devices)
        return Help(option, message, f"{_points(k)} make {k + 1} stages, but {said}, one per stage: keep "
                                     f"{_points(stages - 1)}.", tuple(split_fixes(config.split, stages, balanced)))
    if option == "micro_batches" and strategy and strategy.uses_micro_batches:
        batch, m = effective_batch_size(config), effective_micro_batches(config)
        if "1f1b" in message:
            need = next((d for d in _divisors(batch) if d >= len(devices)), None)
            fixes = [Fix(f"Use {need} micro-batches", {"micro_batches": need})] if need else []
            return Help(option, message, f"The 1f1b schedule needs at least as many micro-batches as stages "
                                         f"({len(devices)}); there are {m}.",
                        tuple(fixes + [Fix("Use gpipe", {"schedule": "gpipe"})]))
        if config.micro_batches and batch % config.micro_batches:
            return Help(option, message, f"Micro-batches: {config.micro_batches} does not divide the batch size "
                                         f"{batch}.", _nearest("micro-batches", "micro_batches",
                                                               config.micro_batches, batch))
    if option == "split_size" and config.split_size:
        batch = effective_batch_size(config)
        if config.split_size > batch or batch % config.split_size:
            return Help(option, message, f"Split size: {config.split_size} does not divide the batch size "
                                         f"{batch}.", _nearest("split size", "split_size",
                                                               min(config.split_size, batch + 1), batch, prefix=True))
    if option == "schedule" and config.schedule == "1f1b" and "1f1b" in message:
        return Help(option, message, "The 1f1b schedule needs a process per stage: CPU devices or distinct GPUs; "
                                     "these stages share a device or mix kinds.", (Fix("Use gpipe",
                                                                                       {"schedule": "gpipe"}),))
    return Help(option, message, in_app_words(option, message))


def split_fixes(split: tuple[int, ...], stages: int, balanced: tuple[int, ...] | None = None) -> list[Fix]:
    """How to make ``split`` fit ``stages`` stages: keep one split point (two stages), keep the first or the
    last ones (more stages), or take the balanced split."""
    want = stages - 1
    if want < 1 or len(split) == want:
        return []
    fixes = []
    if len(split) > want:
        if want == 1:
            fixes = [Fix(f"Keep only split at block {k}", {"split": (k,)}) for k in split[:MOST_SPLIT_FIXES]]
        else:
            for kept in (tuple(split[:want]), tuple(split[-want:])):
                fixes.append(Fix(f"Keep splits at blocks {', '.join(map(str, kept))}", {"split": kept}))
    offered = [tuple(split), *(f.changes["split"] for f in fixes)]
    if balanced is not None and len(balanced) == want and tuple(balanced) not in offered:
        fixes.append(Fix(f"Use the balanced split ({', '.join(map(str, balanced))})", {"split": tuple(balanced)}))
    return fixes


def in_app_words(option: str, message: str) -> str:
    """A problem the app has no words of its own for: its control's name first, and the controls' names
    where the engine's message names flags ("--split-size" reads "Split size", "--loader-workers" "Loader
    workers")."""
    by_flag = {flag: name for name, flag in FLAGS.items()}

    def control(match: re.Match) -> str:
        return control_label(by_flag.get(match.group(0), "")) or match.group(0)
    text = re.sub(r"--[a-z][a-z-]*", control, message)
    label = control_label(option)
    return f"{label}: {text}" if label else text


def control_label(option: str) -> str | None:
    """What the form calls an option's control: its own row's name (``LABELS``), else the label the option
    declares (engine/config.py: More options shows it so), capitalised; None for what is no option."""
    if option in LABELS:
        return LABELS[option]
    declared = _declared_labels().get(option)
    return declared[:1].upper() + declared[1:] if declared else None


@functools.cache
def _declared_labels() -> dict[str, str]:
    from engine.run_options import options
    return {o.name: o.label for o in options()}


# -- helpers ----------------------------------------------------------------------------------
def _devices(config: ExperimentConfig, gpus: int) -> list[devices_mod.Device]:
    from engine.run.resolved_run import run_devices  # torch-free at import
    try:
        return run_devices(config.replace(nodes=None), gpus=gpus)   # the spec's, as each node runs it
    except devices_mod.DeviceError:
        return []


def _one_device(devices: list[devices_mod.Device]) -> str:
    first = devices[0]
    return "cpu:1" if first.kind == "cpu" else first.name


def _devices_fix(n: int, devices: list[devices_mod.Device], gpus: int) -> Fix | None:
    """``n`` devices of the kind the config has: CPU devices, or GPUs when there are that many."""
    if all(d.kind == "cuda" for d in devices):
        if gpus < n:
            return None
        return Fix(f"Use {n} GPUs", {"devices": ",".join(f"cuda:{i}" for i in range(n))})
    return Fix(f"Use {n} devices", {"devices": f"cpu:{n}"})


def _fixes_of(fixes: list[Fix | None]) -> tuple[Fix, ...]:
    return tuple(f for f in fixes if f is not None)


def _points(n: int) -> str:
    return f"{n} split point{'s' if n != 1 else ''}"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _nearest(noun: str, option: str, value: int, batch: int, prefix: bool = False) -> tuple[Fix, ...]:
    """The divisors of the batch nearest ``value``, below and above, as fixes."""
    divisors = _divisors(batch)
    below = max((d for d in divisors if d < value), default=None)
    above = min((d for d in divisors if d > value), default=None)
    words = (lambda d: f"Use {noun} {d}") if prefix else (lambda d: f"Use {d} {noun}")
    return tuple(Fix(words(d), {option: d}) for d in (below, above) if d is not None)
