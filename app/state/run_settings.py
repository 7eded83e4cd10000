"""What tells stored runs apart, for the history's columns: the configuration a run had, in words.

Beside the columns every run has (model, strategy, devices, split, micro-batches,
schedule, batch size, input prep), one column names whatever else differs among
the runs listed (steps, warm-up, learning rate, seed: the settings that change
what is measured, engine/figures/run_names.py, which names compared runs in the
plots' legends by the same rule), so two rows that look alike say why they are
not. A run's summary (what the worker ran) wins over its stored config (what was
asked) where both say.
"""
from __future__ import annotations

from engine.config import ExperimentConfig
from engine.figures import run_names
from engine.results import RunSummary
from engine.rules import effective_batch_size, model_label, watches_script
from engine.strategies import STRATEGIES
from engine.traces.as_run import is_trace_run

# Config keys that have a column of their own (model_file, width and depth are the model's).
SHOWN = frozenset({"strategy", "model", "model_file", "width", "depth", "devices", "split", "micro_batches",
                   "split_size", "schedule", "batch_size", "input_prep"})
NAMES = {"warmup": "warm-up"}


def model_text(config: ExperimentConfig) -> str:
    """"mlp 64×4", "resnet18", "file: my_model.py" or "script: train.py --epochs 1" (a watched script, with
    its arguments)."""
    if watches_script(config):
        return " ".join(filter(None, ["script:", model_label(config), config.script_args]))
    if config.model_file:
        return "file: " + config.model_file.rsplit("/", 1)[-1]
    return f"{config.model} {config.width}×{config.depth}" if config.model == "mlp" else config.model


def _pipelined(config: ExperimentConfig) -> bool:
    strategy = STRATEGIES.get(config.strategy)
    return bool(strategy and strategy.uses_micro_batches)


def micro_batches_text(config: ExperimentConfig, summary: RunSummary | None) -> str:
    """The micro-batches the run had (pipelined strategies), or "—"."""
    if summary is not None and summary.micro_batches:
        return str(summary.micro_batches)
    if not _pipelined(config):
        return "—"
    if config.micro_batches:
        return str(config.micro_batches)
    return f"size {config.split_size}" if config.split_size else "4"


def schedule_text(config: ExperimentConfig, summary: RunSummary | None) -> str:
    """gpipe or 1f1b for a pipelined run; "—" for the others, where no schedule applies."""
    if summary is not None and summary.schedule:
        return summary.schedule
    return config.schedule if _pipelined(config) else "—"


def batch_text(config: ExperimentConfig, summary: RunSummary | None) -> str:
    if summary is not None and summary.batch_size:
        return str(summary.batch_size)
    return "—" if watches_script(config) or is_trace_run(config.strategy) else str(effective_batch_size(config))


def input_prep_text(config: ExperimentConfig) -> str:
    """How its steps got their batches; "—" for a run read from traces, whose input no one configured."""
    return "—" if is_trace_run(config.strategy) else config.input_prep


def differing(configs: list[ExperimentConfig]) -> list[str]:
    """The settings without a column of their own whose values differ among ``configs``."""
    return [k for k in run_names.differing([c.to_dict() for c in configs]) if k not in SHOWN]


def others_text(config: ExperimentConfig, keys: list[str]) -> str:
    """"steps 8 · warm-up 2": a run's values of the keys that differ (None: the default)."""
    values = config.to_dict()
    return " · ".join(f"{NAMES.get(k, k)} {'default' if values[k] is None else values[k]}" for k in keys)
