"""script: the user's own training script, unmodified, on each device as torchrun would start it.

The script spreads its training itself (DDP, FSDP2, a pipeline, ...): each rank runs it under
engine/watch/bootstrap.py, which times its steps from torch's hooks (engine/watch/instruments.py)
and reports them as any rank does, so the worker, the store, the app and the exports take a watched
script like any run. It builds no model of ours: the model options are not read, and ``build`` is
never called. ``steps`` is the most it may run (0: until the script ends).
"""
from __future__ import annotations

import os
import shlex

from engine.config import ExperimentConfig
from engine.problems import Problem
from engine.strategies.strategy import Strategy

UNTIL_THE_END = 0   # config.steps for a script: no limit
HANG_TIMEOUT_S = 600.0   # a script may evaluate or checkpoint for minutes between its optimizer steps
WARMUP_STEPS = 1   # the first step builds optimizer state and warms caches: left out of the figures
DEFAULT_DEVICES = "cpu:2"


PLAIN = "python"   # config.script_launch: one plain process, as `python SCRIPT.py`
PLAIN_DEVICES = "auto"   # a plain script's: its first GPU where there is one, else this machine's cores


def script_config(script: str | None, args: list[str], *, devices: str = DEFAULT_DEVICES,
                  steps: int = UNTIL_THE_END, cwd: str | None = None, hang_timeout_s: float = HANG_TIMEOUT_S,
                  warmup: int | None = None, launch: str = "torchrun", module: str | None = None,
                  samples_per_step: int | None = None) -> ExperimentConfig:
    """A watched script's run as `main.py watch` and the app's Run › Watch a script… describe it: ``args`` its
    own arguments, ``cwd`` the folder it runs in (None: its own), ``steps`` the most it may run, ``warmup`` the
    first steps left out of the figures (None: WARMUP_STEPS, fewer where ``steps`` leaves none measured);
    ``launch`` torchrun's ranks or one plain process (``PLAIN``), which may run a ``module`` instead of a file."""
    if warmup is None:
        warmup = min(WARMUP_STEPS, max(0, (steps or WARMUP_STEPS + 1) - 1))
    return ExperimentConfig(strategy="script", script=os.path.abspath(script) if script else None,
                            script_args=shlex.join(args), script_cwd=cwd, devices=devices, steps=steps,
                            warmup=warmup, hang_timeout_s=hang_timeout_s, script_launch=launch,
                            script_module=module, samples_per_step=samples_per_step)


def plain(config: ExperimentConfig) -> bool:
    """The script runs as one plain process (`python SCRIPT.py`), not as torchrun's ranks."""
    return config.script_launch == PLAIN


class Script(Strategy):
    name = "script"
    description = ("Your own training script, unmodified: one rank per device, started as torchrun starts them, "
                   "timed from torch's hooks (main.py watch).")
    rank_module = "engine.watch.bootstrap"
    builds_model = False
    in_picker = False   # the app starts one from Run › Watch a script…, which asks for the script
    # A script's collectives are its own: their order on each rank is not known to match the others'.
    collectives_span_all_ranks = False

    def world_size(self, config, devices) -> int:
        return 1 if plain(config) else len(devices)

    def devices_needed(self, config) -> int:
        return 1 if plain(config) else 2

    def placed(self, config, devices):
        """A plain script's CPU device is every core, unpinned (its threads torch's default), as python runs it."""
        if not plain(config):
            return devices
        from engine.devices import Device
        return [Device(d.name, d.kind, d.index, None, d.node) if d.kind == "cpu" else d for d in devices]

    def option_problems(self, config) -> list[Problem]:
        found = super().option_problems(config)
        if config.steps < 0:
            found.append(Problem("steps", f"must be 0 (until the script ends) or more, got {config.steps}"))
        # the options of our own model and loop, which a script does not read, where given (not their defaults)
        default = ExperimentConfig()
        found += [Problem(name, "applies to the engine's own model, not a watched script (give it to the script)")
                  for name in ("batch_size", "lr", "model_file", "dtype", "optimizer", "input_prep", "peak")
                  if getattr(config, name) != getattr(default, name)]
        try:
            shlex.split(config.script_args or "")
        except ValueError as exc:
            found.append(Problem("script_args", f"cannot be split as a shell would: {exc}"))
        if config.script_cwd and not os.path.isdir(config.script_cwd):
            found.append(Problem("script_cwd", f"no such folder: {config.script_cwd}"))
        if plain(config) and config.nodes:
            found.append(Problem("nodes", "a script run as plain python is one process on this machine: watch it "
                                          "as torchrun ranks (watch -- SCRIPT.py, or -- torchrun ...) over nodes"))
        if config.script_module:
            if config.script:
                found.append(Problem("script_module", "give either a script file or a module (-m), not both"))
            elif not plain(config):
                found.append(Problem("script_module", "a module (-m) runs as plain python: watch -- python -m "
                                                      "MODULE"))
            elif not all(part.isidentifier() for part in config.script_module.split(".")):
                found.append(Problem("script_module", f"not a module name: {config.script_module!r}"))
            return found
        if not config.script:
            return found + [Problem("script", "give the training script to run (--script PATH)")]
        if not os.path.isfile(config.script):
            return found + [Problem("script", f"no such file: {config.script}")]
        try:
            with open(config.script, "rb") as f:
                compile(f.read(), config.script, "exec")
        except SyntaxError as exc:
            found.append(Problem("script", f"{exc.filename}, line {exc.lineno}: {exc.msg}: "
                                           f"{(exc.text or '').strip()}"))
        return found

    def check(self, config, devices, n_blocks) -> list[Problem]:
        if plain(config) and (len(devices) != 1 or devices[0].kind == "cuda" and devices[0].index != 0):
            return [Problem("devices", "a script run as plain python is one process: give one device (cpu: this "
                                       "machine's cores; cuda:0: its GPUs, which the script picks itself, cuda:0 "
                                       "first, as CUDA_VISIBLE_DEVICES orders them), got "
                                       + ", ".join(d.name for d in devices))]
        kinds = {d.kind for d in devices}
        if len(kinds) > 1:
            return [Problem("devices", "a watched script's ranks are all on CPU devices (cpu:N) or all on GPUs "
                                       "(cuda:0,cuda:1,...), got " + ", ".join(d.name for d in devices))]
        by_node: dict[str | None, list[int]] = {}
        for d in devices:
            if d.kind == "cuda":
                by_node.setdefault(d.node, []).append(d.index)
        for gpus in by_node.values():   # on each node its own: torchrun numbers LOCAL_RANK per node
            if gpus != list(range(len(gpus))):
                # torchrun gives rank k LOCAL_RANK k, and a script takes cuda:LOCAL_RANK for its own
                return [Problem("devices", "a watched script's rank k works on cuda:k (its LOCAL_RANK): give "
                                           f"{','.join(f'cuda:{k}' for k in range(len(gpus)))}, and choose which "
                                           "GPUs those are with CUDA_VISIBLE_DEVICES, as for torchrun; got "
                                           + ", ".join(d.name for d in devices))]
        return []
