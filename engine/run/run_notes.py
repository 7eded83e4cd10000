"""What a user must know to read a run's result: the notes the worker sends with ``started`` and the summary
(the batch norm's, the profiled steps', the counted step's, why there is no theory, and each rank's own)."""
from __future__ import annotations

from engine.config import ExperimentConfig
from engine.measure.counted_step import counted_step_note
from engine.measure.profiling import profiled_steps
from engine.run.resolved_run import ResolvedRun


def run_notes(config: ExperimentConfig, resolved: ResolvedRun, builds_model: bool, batch_norm: bool,
              ranks: list) -> list[str]:
    """``resolved``: the run as resolved (its devices and why no theory holds); ``builds_model``: the strategy's
    (a watched script's does not); ``ranks``: the worker's (engine/run/local_ranks.py ``Rank``: their probe notes
    and their own)."""
    from engine.run.validate import batch_norm_note
    steps = profiled_steps(config)
    profiled = (f"steps {steps.start} to {steps.stop - 1} ran under torch.profiler (--profile-steps): its "
                "overhead is in their times" if steps else None)
    notes = [batch_norm_note(config, batch_norm, len(resolved.devices)), profiled,
             counted_step_note(config.steps, config.warmup, steps) if builds_model else None,
             *resolved.theory_notes]
    notes += list(dict.fromkeys(line for rr in ranks for line in rr.probe_notes()))   # the two-way's once
    notes += list(dict.fromkeys(line for rr in ranks if rr.note for line in rr.note.splitlines()))   # once
    return [note for note in notes if note]
