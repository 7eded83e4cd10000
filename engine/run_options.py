"""The run options of the command line (``run``, and ``experiment``'s overrides), and the config they give.

Each option's help names what the registries allow (strategies, schedules,
models, optimizers, dtypes), read from them; ``config_from_args`` makes the
``ExperimentConfig`` every run is described by (engine/config.py).
"""
from __future__ import annotations

import argparse
import os

from engine import models, strategies
from engine.config import INPUT_PREP, TIMELINE_MODES, ConfigError, ExperimentConfig, Problem
from engine.nodes.token import DEFAULT_TEXT as TOKEN_DEFAULT
from engine.precision import DTYPES, OPTIMIZERS


def _strategy_help() -> str:
    return "; ".join(f"{i.name}: {i.description}" for i in strategies.STRATEGIES.values())


def add_run_options(p: argparse.ArgumentParser, *, for_experiment: bool = False) -> None:
    """The run options; for an experiment, with no defaults, so only what the user gave overrides the preset's."""
    g = p.add_argument_group("run options")
    if not for_experiment:
        g.add_argument("--strategy", default="single", help=_strategy_help())
    g.add_argument("--model", default=None, help=f"one of: {', '.join(models.MODELS)} (default mlp), or "
                                                 f"{models.TORCHVISION}NAME for any torchvision classification "
                                                 "model (`models --torchvision` lists them)")
    g.add_argument("--model-file", default=None, help="a .py file with build_model() returning any nn.Module and "
                                                      "make_batch(batch_size, generator)")
    g.add_argument("--image-size", type=int, default=None,
                   help="torchvision models: image height and width (default: the size its weights expect)")
    g.add_argument("--split-level", type=int, default=1,
                   help="any-module models: split points at " + " or ".join(
                       f"{k}, {text}" for k, text in models.SPLIT_LEVELS.items()) + " (default 1)")
    g.add_argument("--width", type=int, default=512, help="mlp width (default 512)")
    g.add_argument("--depth", type=int, default=8, help="mlp depth (default 8)")
    g.add_argument("--devices", default="auto", help='"auto", "cpu:N", "cuda:0,cuda:1", "cpu,cuda:0"')
    g.add_argument("--split", default=None,
                   help="first block (or submodule) of each later stage, by index or name, e.g. 5, 3,6, layer3 or "
                        "layers.2,layers.4 (for a chain of blocks, layer3 means its first block, layer3.0); "
                        "default: the balanced split")
    g.add_argument("--micro-batches", type=int, default=None, help="pipeline: micro-batches per step")
    g.add_argument("--split-size", type=int, default=None, help="pipeline: samples per micro-batch (the tutorial's)")
    g.add_argument("--schedule", default="gpipe", help="pipeline schedule: " + "; ".join(
        f"{name}: {text}" for name, text in strategies.SCHEDULES.items()))
    g.add_argument("--stages-per-device", type=int, default=None,
                   help="pipeline: stages each device runs, V (default: 1 for gpipe and 1f1b, 2 for the others; "
                        "zbv and dualpipev run exactly 2, placed in a V)")
    g.add_argument("--batch-size", type=int, default=None, help="global batch size (default: the model's)")
    g.add_argument("--steps", type=int, default=20)
    g.add_argument("--warmup", type=int, default=None, help="steps left out of the timings (default 2)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--lr", type=float, default=None)
    g.add_argument("--optimizer", default="sgd", help="; ".join(f"{n}: {d}" for n, d in OPTIMIZERS.items()))
    g.add_argument("--dtype", default="float32", help="; ".join(f"{n}: {d}" for n, d in DTYPES.items()))
    g.add_argument("--profile-steps", type=int, default=0,
                   help="measured steps each rank records with torch.profiler, kept with the run and exported with "
                        "`export --format trace` (default 0: none)")
    g.add_argument("--hang-timeout", type=float, default=120.0, help="seconds without progress before a rank is declared hung")
    g.add_argument("--timeline", default="sampled",
                   help="; ".join(f"{name}: {text}" for name, text in TIMELINE_MODES.items()) + " (default sampled)")
    g.add_argument("--input-prep", default="ahead",
                   help="; ".join(f"{name}: {text}" for name, text in INPUT_PREP.items()) + " (default ahead)")
    if not for_experiment:  # experiments run on this machine (engine.experiments.ExperimentRunner)
        g.add_argument("--nodes", default=None,
                       help="run over several machines, each running `main.py node`: ADDR:PORT,ADDR:PORT (each node "
                            "runs --devices; ranks go node by node in address order)")
        g.add_argument("--token-file", default=None,
                       help=f"with --nodes: the file holding the token the node agents share (default: "
                            f"{TOKEN_DEFAULT})")
    g.add_argument("--telemetry-hz", type=float, default=10.0, help="telemetry sampling rate, 0 < Hz <= 50")
    g.add_argument("--db", default=None, help="the run store (default: SPLITSCOPE_DB or the user data dir)")
    g.add_argument("--json", action="store_true", help="print only the summary as one JSON object")
    if for_experiment:
        for action in g._group_actions:
            if action.dest not in ("json", "telemetry_hz", "db", "hang_timeout"):
                action.default = argparse.SUPPRESS


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
    tokens = None
    if args.split is not None:
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
    warmup = args.warmup if args.warmup is not None else min(2, max(0, args.steps - 1))
    config = ExperimentConfig(
        strategy=args.strategy, model=args.model or ("custom" if args.model_file else "mlp"),
        # Absolute: the checks and the ranks run with the project's folder as their working directory.
        model_file=os.path.abspath(args.model_file) if args.model_file else None, width=args.width, depth=args.depth, devices=args.devices,
        micro_batches=args.micro_batches, split_size=args.split_size, schedule=args.schedule,
        batch_size=args.batch_size, steps=args.steps, warmup=warmup, seed=args.seed, lr=args.lr,
        hang_timeout_s=args.hang_timeout, input_prep=args.input_prep, timeline=args.timeline,
        image_size=args.image_size, split_level=args.split_level, stages_per_device=args.stages_per_device,
        profile_steps=args.profile_steps, optimizer=args.optimizer, dtype=args.dtype, nodes=args.nodes,
        token_file=os.path.abspath(args.token_file) if args.token_file else None)
    return config, tokens
