"""``main.py watch [--devices cpu:N | cuda:0,...] [--steps N] [--nodes ...] [--json] -- SCRIPT.py [ARGS]`` (or ``-- torchrun [torchrun
options] SCRIPT.py [ARGS]``, engine/watch/torchrun_form.py): a user's own training script, unmodified, run as the
ranks of one run (``--strategy script``, engine/strategies/script.py) and timed by kind per device; or ``-- python
SCRIPT.py [ARGS]`` (``python -m MODULE``, engine/watch/python_form.py): one plain process, as python runs it. It is
``run``'s short way: the same worker, store, summary and exports (engine/cli/ runs the config made here)."""
from __future__ import annotations

import argparse
import os

from engine.config import ConfigError, ExperimentConfig
from engine.measure.counted_step import COUNTED_STEP
from engine.problems import Problem
from engine.strategies.script import (
    DEFAULT_DEVICES,
    HANG_TIMEOUT_S,
    PLAIN,
    PLAIN_DEVICES,
    UNTIL_THE_END,
    WARMUP_STEPS,
    script_config,
)

# How this command names the options it takes otherwise than `run` does (engine.cli.run_command.validate_or_report).
NAMES = {"script": "SCRIPT", "script_args": "ARGS", "script_cwd": "the current folder", "torchrun": "torchrun",
         "python": "python", "script_module": "-m MODULE", "samples_per_step": "--samples-per-step"}


def add_parser(sub) -> None:
    watch = sub.add_parser("watch", help="run your own training script (torchrun-style, one rank per device) and "
                                         "see each device's time by kind: forward, backward, communication, "
                                         "optimizer, data, idle; stored as a run")
    watch.add_argument("--devices", default=None,
                       help=f'"cpu:N": N ranks, each pinned to a core of its own (default: torchrun\'s '
                            f'--nproc-per-node, else {DEFAULT_DEVICES}); "cuda:0,cuda:1,...": a rank per GPU, rank '
                            f'k on cuda:k (its LOCAL_RANK; CUDA_VISIBLE_DEVICES chooses which, as for torchrun)')
    watch.add_argument("--steps", type=int, default=None,
                       help="stop the script after this many training steps (each of its optimizers stepped once, or an "
                            "update by hand; default: let it end)")
    watch.add_argument("--warmup", type=int, default=None,
                       help=f"the first steps left out of the figures (default {WARMUP_STEPS}; step "
                            f"{COUNTED_STEP}'s FLOPs are counted, which slows it)")
    watch.add_argument("--samples-per-step", dest="samples_per_step", type=int, default=None,
                       help="the samples each process's step trains on (each rank's: the run's are their sum), where "
                            "the script does not say (watch.step) and its "
                            "batches come from no DataLoader (default: the first dimension of the model's first "
                            "tensor input)")
    watch.add_argument("--profile-steps", default=None, metavar="N|A:B",
                       help="record steps A to B (counted from 0), or the first N measured, with torch.profiler on "
                            "every rank (CUDA kernels on GPUs, CPU ops elsewhere), kept with the run; read by "
                            "`main.py trace` and exported with `export --format trace`")
    watch.add_argument("--hang-timeout", dest="hang_timeout_s", type=float, default=HANG_TIMEOUT_S,
                       help=f"seconds without a step before a rank is declared hung (default {HANG_TIMEOUT_S:g})")
    watch.add_argument("--telemetry-hz", type=float, default=10.0, help="telemetry sampling rate, 0 < Hz <= 50")
    watch.add_argument("--nodes", default=None,
                       help="ADDR:PORT,... of node agents started with --allow-scripts: the script travels to "
                            "each and runs there, --devices on every node (docs/nodes.md)")
    watch.add_argument("--token-file", default=None, help="with --nodes: the nodes' shared token (as for `run`)")
    watch.add_argument("--db", default=None, help="the run store (default: SPLITSCOPE_DB or the user data dir)")
    watch.add_argument("--json", action="store_true", help="print only the summary as one JSON object")
    watch.add_argument("script", help="the training script, as you would give it to torchrun (a rank per "
                                      "device), or `torchrun` and its options before the script, or `python` "
                                      "(`python SCRIPT.py` or `python -m MODULE`: one plain process, as python "
                                      "runs it)")
    watch.add_argument("script_args", nargs=argparse.REMAINDER, help="its own arguments")


def device_count(devices: str) -> int | None:
    """How many ranks ``--devices`` asks for, where its text says (cpu:N, or a list of GPUs); None otherwise."""
    if devices.startswith("cpu:") and devices[4:].isdigit():
        return int(devices[4:])
    if devices.startswith("cuda:"):
        return len(devices.split(","))
    return None


def watch_config(args) -> tuple[ExperimentConfig, None]:
    """The run's config (as ``run_options.config_from_args`` makes one: the split tokens none), or ConfigError
    naming each option that is wrong, torchrun's form read first."""
    from engine.watch import python_form, torchrun_form
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    script, devices, nproc, found = args.script, args.devices, None, []
    launch, module = "torchrun", None
    if python_form.is_python(args.script):
        form, refused = python_form.read(script_args)
        found += [Problem("python", text) for text in refused]
        if form is None:
            raise ConfigError(found)
        script, module, script_args, launch = form.script, form.module, form.args, PLAIN
        devices = devices or PLAIN_DEVICES
    elif os.path.basename(args.script) == "torchrun":
        form, refused = torchrun_form.read(script_args)
        found += [Problem("torchrun", text) for text in refused]
        if form is None:
            raise ConfigError(found)
        script, script_args, nproc = form.script, form.args, form.nproc_per_node
    if devices is None:
        devices = f"cpu:{nproc}" if nproc else DEFAULT_DEVICES
    elif nproc is not None and device_count(devices) not in (None, nproc):
        found.append(Problem("devices", f"{devices} and torchrun --nproc-per-node {nproc}: give one of them "
                                        "(or the same count)"))
    profiled = profile_range(args.profile_steps, found)
    if args.steps is not None and args.steps < 1:
        found.append(Problem("steps", f"must be at least 1, got {args.steps}"))
    if not 0 < args.telemetry_hz <= 50:
        found.append(Problem("telemetry_hz", f"must be more than 0 and at most 50, got {args.telemetry_hz:g}"))
    if found:
        raise ConfigError(found)
    config = script_config(script, script_args, devices=devices, steps=args.steps or UNTIL_THE_END, cwd=os.getcwd(),
                           hang_timeout_s=args.hang_timeout_s, warmup=args.warmup, launch=launch, module=module,
                           samples_per_step=args.samples_per_step)
    if profiled is not None:
        config = config.replace(profile_steps=profiled[1], profile_from=profiled[0])
    return config.replace(nodes=args.nodes, token_file=args.token_file), None


def profile_range(given: str | None, found: list[Problem]) -> tuple[int | None, int] | None:
    """``--profile-steps``: "A:B" as (A, B - A + 1), "N" as (None: from the first measured, N); a problem in
    ``found`` where it is neither."""
    if given is None:
        return None
    first, colon, last = given.partition(":")
    if not colon and first.strip().isdigit():
        return None, int(first)
    if colon and first.strip().isdigit() and last.strip().isdigit() and int(last) >= int(first):
        return int(first), int(last) - int(first) + 1
    found.append(Problem("profile_steps", f"N (the first N measured steps) or A:B (steps A to B, counted from 0, "
                                          f"A at most B), got {given!r}"))
    return None
