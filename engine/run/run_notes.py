"""What a user must know to read a run's result: the notes the worker sends with ``started`` and the summary
(the batch norm's, the profiled steps', the counted step's, why there is no theory, and each rank's own)."""
from __future__ import annotations

from engine.config import ExperimentConfig
from engine.measure.counted_step import counted_step_note
from engine.measure.profiling import profiled_steps
from engine.record.summary import why_no_theory
from engine.rules import effective_micro_batches


def run_notes(config: ExperimentConfig, devices: list, builds_model: bool, world: int, batch_norm: bool,
              ranks: list) -> list[str]:
    """``devices``: the run's (engine.devices.Device); ``builds_model``: the strategy's (a watched script's does
    not); ``ranks``: the worker's (engine/run/local_ranks.py ``Rank``: their probe notes and their own)."""
    from engine.run.validate import batch_norm_note
    steps = profiled_steps(config)
    profiled = (f"steps {steps.start} to {steps.stop - 1} ran under torch.profiler (--profile-steps): its "
                "overhead is in their times" if steps else None)
    notes = [batch_norm_note(config, batch_norm, len(devices)), profiled,
             counted_step_note(config.steps, config.warmup, steps) if builds_model else None,
             why_no_theory(config.strategy, [d.name for d in devices], effective_micro_batches(config), world > 1,
                           config.schedule)]
    notes += list(dict.fromkeys(line for rr in ranks for line in rr.probe_notes()))   # the two-way's once
    notes += list(dict.fromkeys(line for rr in ranks if rr.note for line in rr.note.splitlines()))   # once
    return [note for note in notes if note]
