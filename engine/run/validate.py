"""Full validation of a config, before anything launches.

``engine.rules.problems`` checks the options on their own; here the devices are
resolved and the model is built (it imports torch), so split points, stages and
model files are checked too. Every problem is reported at once.

Importing torch costs a process about 500 MB, which a process that only
supervises a run (the command line's) would keep for the whole run: with
``validate_in_child()`` the checks run in a short-lived child
(``python -m engine.run.validate``) and the supervising process never imports torch.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from engine import devices as devices_mod, forkserver, models, rules, strategies
from engine.config import ConfigError, ExperimentConfig, Problem
from engine.cores import usable_cores
from engine.rules import effective_batch_size, effective_micro_batches, effective_stages_per_device
from engine.run import loader_placement
from engine.run.resolved_run import ResolvedRun, resolve, run_devices
from engine.wire import children, codec


@dataclass
class Checked:
    """A config after every check: with ``--split`` names resolved to block indices, and its run resolved
    (engine/run/resolved_run.py) or its problems."""
    config: ExperimentConfig
    plan: ResolvedRun | None
    problems: list[Problem]


_IN_CHILD = False
CHILD_START_S = 120.0   # the validation child's start on a busy machine: an interpreter that imports torch


def validate_in_child(on: bool = True) -> bool:
    """From now on, ``check_all`` runs its checks in a short-lived child process (the command line and the app
    do); the previous choice."""
    global _IN_CHILD
    previous, _IN_CHILD = _IN_CHILD, on
    return previous


def check_all(items: list[tuple[ExperimentConfig, list | None]], *, names_only: bool = False) -> list[Checked]:
    """Each (config, ``--split`` tokens or None) checked: here, or in one child process for all of them.
    ``names_only``: only resolve the split's block names (an experiment's base config is no run itself)."""
    if _IN_CHILD:
        return _check_in_child(items, names_only)
    return [_check_one(config, tokens, names_only) for config, tokens in items]


def _check_one(config: ExperimentConfig, tokens: list | None, names_only: bool = False) -> Checked:
    if tokens is not None:
        if all(isinstance(t, int) for t in tokens):
            config = config.replace(split=tuple(tokens))
        else:
            try:
                config = config.replace(split=resolve_split_names(config, tokens))
            except ConfigError as exc:
                # Every problem at once: the names could not be resolved, and whatever else is wrong.
                others = [] if names_only else rules.problems(config.replace(split=None))
                return Checked(config, None, exc.problems + [p for p in others if p not in exc.problems])
    if names_only:
        return Checked(config, None, [])
    run_plan, problems = plan(config)
    return Checked(config, run_plan, problems)


def _check_in_child(items: list[tuple[ExperimentConfig, list | None]], names_only: bool) -> list[Checked]:
    from engine.environment import ROOT as root, with_project_path
    request = codec.dumps(children.CheckRequest(names_only, [children.CheckItem(config.to_dict(), tokens)
                                                             for config, tokens in items]))
    env = with_project_path()
    # The child ends a user's call that overruns the hang timeout itself (_answer_when_overdue); this bound is for
    # a child that cannot, stuck in native code that holds Python's lock.
    limit = sum(config.hang_timeout_s if 0 < config.hang_timeout_s <= rules.MOST_HANG_TIMEOUT_S else 0.0
                for config, _ in items) + CHILD_START_S   # one out of bounds is a problem the child names
    try:
        done = forkserver.run_module("engine.run.validate", input=request, env=env, cwd=root, timeout=limit,
                                     imports=sorted({m for config, _ in items for m in models.model_imports(config.model)}))
    except subprocess.TimeoutExpired:
        return [Checked(config, None, [Problem("config", f"validation did not finish within {limit:g} s (the hang "
                                                         "timeouts and its start); it was ended")])
                for config, _ in items]
    try:
        answers = children.read_list(children.CheckAnswer, done.stdout, children.VALIDATION)
    except codec.WireError:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return [Checked(config, None, [Problem("config", f"validation failed: {why}")]) for config, _ in items]
    return [Checked(ExperimentConfig.from_dict(a.config), ResolvedRun.from_dict(a.plan) if a.plan else None,
                    list(a.problems)) for a in answers]


def _serve() -> int:
    """``python -m engine.run.validate``: {"names_only", "items": [{"config", "tokens"}]} on stdin, the answers
    on stdout. A model file may print: what it prints goes to stderr, the answers alone to stdout."""
    answers_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    request = codec.read(children.CheckRequest, sys.stdin.read(), children.VALIDATION)
    configs = [ExperimentConfig.from_dict(item.config) for item in request.items]
    answers: list[children.CheckAnswer] = []
    lock = threading.Lock()

    def write(extra: list[children.CheckAnswer]) -> None:
        answers_out.write(codec.dumps(answers + extra))
        answers_out.close()
    threading.Thread(target=_answer_when_overdue, args=(configs, answers, lock, write), daemon=True,
                     name="user-code-deadline").start()
    for config, item in zip(configs, request.items, strict=True):
        checked = _check_one(config, item.tokens, request.names_only)
        with lock:
            answers.append(_answer(checked))
    with lock:
        write([])
    return 0


def _answer(checked: Checked) -> children.CheckAnswer:
    return children.CheckAnswer(checked.config.to_dict(), checked.plan.to_dict() if checked.plan else None,
                                list(checked.problems))


def _answer_when_overdue(configs: list[ExperimentConfig], answers: list[children.CheckAnswer], lock, write) -> None:
    """The validation child's deadline for the user's code: a model file's import, build_model(), make_batch() or
    forward that runs longer than the config's hang timeout is named in the answer, and the child ends (its
    call cannot be interrupted)."""
    from engine.models.user_calls import overdue
    while True:
        time.sleep(0.1)
        with lock:
            checking = configs[len(answers)] if len(answers) < len(configs) else None
            late = overdue(checking.hang_timeout_s) if checking is not None else None
            if late is None:
                continue
            option = "model_file" if checking.model_file else "model"
            problem = Problem(option, f"{checking.model_file or checking.model}: {late} did not return within "
                              f"{checking.hang_timeout_s:g} s (--hang-timeout); a model file must build its model "
                              "and batches without waiting on anything")
            write([children.CheckAnswer(config.to_dict(), None, [problem]) for config in configs[len(answers):]])
            os._exit(0)


def batch_norm_note(config: ExperimentConfig, has_batch_norm: bool, devices: int) -> str | None:
    """Why a model with BatchNorm trains differently under this run than on one device, if it does."""
    strategy = strategies.get(config.strategy)
    if not has_batch_norm:
        return None
    if strategy.data_parallel and devices > 1:
        part = "each replica's slice of the batch"
    elif strategy.uses_micro_batches and effective_micro_batches(config) > 1:
        part = "each micro-batch"
    else:
        return None
    return (f"the model has BatchNorm: its statistics come from {part}, not the whole batch, so training "
            "differs from one device's (parameters do not match a single-device run)")


def check(config: ExperimentConfig) -> list[Problem]:
    return plan(config)[1]


def plan(config: ExperimentConfig) -> tuple[ResolvedRun | None, list[Problem]]:
    found = rules.problems(config)
    devices: list[devices_mod.Device] = []
    try:
        # --nodes and --devices problems are named already (rules.node_problems)
        devices = run_devices(config) if not any(p.option in ("nodes", "devices") for p in found) else []
    except devices_mod.DeviceError as exc:
        found.append(Problem("devices", str(exc)))
    if devices and not found:
        found.extend(loader_placement.placement_problems(config, usable_cores()))
        if config.pin_memory and not any(d.kind == "cuda" for d in devices):
            found.append(Problem("pin_memory", "applies to runs on GPUs (page-locked memory is what a copy to a "
                                               "GPU reads asynchronously); these devices are CPUs"))
    spec = None
    if found:  # building a model from invalid options could fail or take all memory
        return None, found
    impl = strategies.get(config.strategy)
    if not impl.builds_model:   # a script of the user's: no model of ours to build
        found = impl.check(config, devices, 0)
        return (None, found) if found else (resolve(config, devices), [])
    if config.model_file or models.lookup(config.model):
        spec, problem = _build_model(config)
        if problem:
            found.append(problem)
    if found or spec is None:
        return None, found
    n_blocks = len(spec.blocks)
    from engine.nodes.cluster import strategy_problems
    found.extend(strategy_problems(config, impl, devices))
    found.extend(impl.check(config, devices, n_blocks))
    if not found:
        found.extend(impl.model_problems(config, spec, devices))
    if not found:
        found.extend(_module_problems(config, spec, impl, devices))
    if found:
        return None, found
    warnings = []
    note = batch_norm_note(config, spec.has_batch_norm, len(devices))
    if note:
        warnings.append(note)
    sharing = devices_mod.sharing_note(devices) if not config.nodes else None
    if sharing:
        warnings.append(sharing)
    loader = loader_placement.placement_note(config, devices, usable_cores())
    if loader:
        warnings.append(loader)
    return resolve(config, devices, n_blocks=n_blocks, block_names=spec.block_names, warnings=warnings), []


MODEL_OPTIONS = {"model", "model_file", "width", "depth", "seed"}


def resolve_split_names(config: ExperimentConfig, tokens: list[int | str]) -> tuple[int, ...]:
    """Split points given by index or by block name: "layer3.0", or "layer3" for the first block
    inside layer3 (the tutorial's ``seq2`` starts there). Raises ConfigError naming what exists."""
    # Only what building the model reads: an experiment's base names blocks for points whose
    # strategies differ from its own.
    found = [p for p in rules.problems(config.replace(split=None)) if p.option in MODEL_OPTIONS]
    if found:
        raise ConfigError(found)
    spec, problem = _build_model(config)
    if problem:
        raise ConfigError([problem])
    names = spec.block_names
    points = []
    for token in tokens:
        if isinstance(token, int):
            points.append(token)
            continue
        index = next((i for i, name in enumerate(names) if name == token or name.startswith(token + ".")), None)
        if index is None:
            deeper = " (a submodule inside one of them: add --split-level 2)" if (
                spec.traced and config.split_level == 1 and "." in token) else ""
            what = "split point" if spec.traced else "block"
            raise ConfigError([Problem("split", f"no {what} named {token!r} in {spec.name}; its "
                                                           f"{what}s: {', '.join(names)}{deeper}")])
        points.append(index)
    return tuple(points)


def _module_problems(config: ExperimentConfig, spec, impl, devices) -> list[Problem]:
    """What a model that is not a chain of blocks cannot do here: a split level it has no use for, or a trace
    that fails (checked on the meta device, at the run's split or an even one)."""
    if not spec.traced:
        if config.split_level != 1:
            return [Problem("split_level", f"applies to models whose split points are submodules; {spec.name} is "
                                           "a chain of blocks, and its split points are its blocks")]
        return []
    if not impl.uses_split:
        return []
    from engine.models import tracing
    from engine.models.split_units import module_device
    stages = len(devices) * effective_stages_per_device(config)
    split = config.split or tuple(round(k * len(spec.blocks) / stages) for k in range(1, stages))
    micro = max(1, effective_batch_size(config) // effective_micro_batches(config))
    try:
        tracing.cut(spec, split, spec.data.example_inputs(micro, module_device(spec.module)))
    except tracing.TraceError as exc:
        return [Problem("model_file" if config.model_file else "model", str(exc))]
    return []


def _meta_initializers_skipped():
    """A torch function mode in which a random initializer of a meta tensor returns it as it is: on the meta
    device there are no values to draw, and torch draws them there through its reference implementations, whose
    first call imports its compiler (2.8 s of a first check here, most of the app's wait for Run)."""
    import torch
    from torch.overrides import TorchFunctionMode
    initializers = {torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.random_, torch.Tensor.bernoulli_,
                    torch.Tensor.exponential_, torch.Tensor.cauchy_, torch.Tensor.log_normal_,
                    torch.Tensor.geometric_}

    class SkipMetaInitializers(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in initializers and args and getattr(args[0], "is_meta", False):
                return args[0]
            return func(*args, **(kwargs or {}))
    return SkipMetaInitializers()


def _build_model(config: ExperimentConfig):
    import torch

    from engine.models import build

    def on_meta_else_here():
        # On the meta device: the blocks' structure without their memory, so checking a
        # 16384-wide model takes no gigabytes and resnet50 builds in a blink.
        try:
            with torch.device("meta"), _meta_initializers_skipped():
                return build.build(config)
        except (RuntimeError, NotImplementedError) as exc:
            if "meta" not in str(exc).lower():
                raise
            # A constructor that reads a tensor's values (torchvision's RegNet, a model file's
            # ``x.item()``) cannot build on the meta device: build it for real.
            return build.build(config)
    return built_or_problem(config, on_meta_else_here)


def built_or_problem(config: ExperimentConfig, make):
    """(``make()``'s model spec, None), or (None, the problem building the config's model, named by its option)."""
    from engine.models.custom import ModelFileError
    from engine.models.torchvision_zoo import TorchvisionModelError
    try:
        return make(), None
    except ModelFileError as exc:
        return None, Problem("model_file", str(exc))
    except TorchvisionModelError as exc:
        return None, Problem(exc.option, str(exc))
    except (RuntimeError, ValueError, MemoryError) as exc:
        return None, Problem("model", f"could not build {config.model}: {type(exc).__name__}: {exc}")

if __name__ == "__main__":
    sys.exit(_serve())
