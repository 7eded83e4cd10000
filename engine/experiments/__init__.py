"""Click-to-run experiments: the tutorials' comparisons and sweeps, as sequences of stored runs.

A preset is a function from a base config to a list of points (label, config,
sweep value). The base is what the user set (the app's panel, the command line's
options); a preset keeps all of it but what it ``sets`` itself, which it says: the
pipeline points of compare-strategies, split-size and split-point run the base's
schedule and micro-batching, and only ``schedules`` chooses schedules. The runner
runs each point ``repeats`` times through RunSession,
groups the runs under one experiment id, and reduces them to the experiment
result (docs/summary.md). It can be stopped between or during runs and keeps what
finished.
"""
from __future__ import annotations

from engine.experiments.presets import PRESETS, Point, Preset, default_config, limits, preset_title  # noqa: F401
from engine.experiments.reduction import best_and_tied, reduce_point, stored_result  # noqa: F401
from engine.experiments.runner import ExperimentRunner  # noqa: F401
