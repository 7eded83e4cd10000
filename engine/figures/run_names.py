"""How runs compared are named: by what sets them apart ("pipeline m=8" and "pipeline m=4").

Two runs' start times say when they ran, not what they measured. A comparison's
legend names each run by its strategy and the settings (engine/config.py
ExperimentConfig fields) that differ among the runs compared, as they ran: the
summary's devices, split and micro-batches where it has them (the settings may
leave them to the engine). Runs of one configuration are told apart by their
labels (the history's start time), and numbered if even those agree.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from engine.results import RunSummary

# The settings a legend may name, in the order it names them; the others (hang_timeout_s) do not
# change what is measured.
NAMED = ("model", "model_file", "width", "depth", "devices", "split", "micro_batches", "split_size",
         "schedule", "batch_size", "steps", "warmup", "lr", "seed", "input_prep")
SHORT = {"micro_batches": "m", "split_size": "split size", "batch_size": "batch", "input_prep": "input",
         "model_file": "file"}


def as_ran(config: dict, summary: RunSummary | None) -> dict:
    """The settings a run ran with: the summary's devices, split and micro-batches over the config's (1 for a
    strategy that does not cut the batch: what ran, where the config leaves it unset)."""
    ran = dict(config or {})
    if summary is not None:
        if summary.devices:
            ran["devices"] = list(summary.devices)
        if summary.split is not None:
            ran["split"] = list(summary.split)
        if summary.micro_batches:
            ran["micro_batches"] = summary.micro_batches
        elif _runs_batches_whole(summary.strategy):
            ran["micro_batches"] = 1   # a strategy without micro-batches runs each batch whole (the naive split: m=1)
    if ran.get("model_file"):
        ran["model_file"] = os.path.basename(str(ran["model_file"]))
    return ran


def _text(value) -> str:
    if value is None:
        return "auto"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def differing(configs: Sequence[dict]) -> list[str]:
    """The named settings whose values are not the same in every config."""
    return [key for key in NAMED if len({_text(c.get(key)) for c in configs}) > 1]


def run_names(configs: Sequence[dict], labels: Sequence[str],
              summaries: Sequence[RunSummary | None] | None = None) -> list[str]:
    """One name per run: its strategy and the settings that differ ("pipeline m=8"), its label where the
    settings agree (or say no strategy), numbered where the labels do too (two runs started in one second)."""
    labels = list(labels)
    if len(labels) < 2:
        return labels
    ran = [as_ran(c, s) for c, s in zip(configs, summaries or [None] * len(labels), strict=True)]
    # A run read from profiler traces (engine/traces/as_run.py) has none of an engine run's settings: it is named
    # by its traces ("trace traces: NAME"), and the settings that tell the others apart are theirs alone.
    traced = [r.get("strategy") == "trace" for r in ran]
    keys = differing([r for r, trace in zip(ran, traced, strict=True) if not trace])
    parts = [[str(r.get("model"))] if trace else [f"{SHORT.get(k, k.replace('_', ' '))}={_text(r.get(k))}"
                                                  for k in keys] for r, trace in zip(ran, traced, strict=True)]
    strategies = [str(r["strategy"]) if r.get("strategy") else "" for r in ran]
    names = [" ".join([strategy or label, *part])
             for strategy, label, part in zip(strategies, labels, parts, strict=True)]
    # the same settings: the label tells them apart ("18:29:22 pipeline" names its strategy already)
    names = [" ".join(filter(None, [label, "" if strategy in label.split() else strategy, *part]))
             if names.count(name) > 1 else name
             for name, label, strategy, part in zip(names, labels, strategies, parts, strict=True)]
    return [f"{name} #{names[:i].count(name) + 1}" if names.count(name) > 1 else name
            for i, name in enumerate(names)]


def _runs_batches_whole(strategy: str | None) -> bool:
    """Our model under a strategy that cuts no batch into micro-batches (not a user's script, nor a job's traces,
    which are no strategy of the registry)."""
    from engine.strategies import STRATEGIES
    known = STRATEGIES.get(strategy or "")
    return known is not None and known.builds_model and not known.uses_micro_batches
