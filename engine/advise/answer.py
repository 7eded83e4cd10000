"""``main.py advise --json``'s answer read back into the typed results (engine/advise/results.py): the inverse of
command.py's ``advice_json``, for a process that ran advise as its child (the app's Advise,
app/services/advise_client.py).

Torch-free. The answer is read strictly (engine/wire/advise.py): one of another shape, or without a choice, is
None.
"""
from __future__ import annotations

from engine.advise.results import Advice, Candidate, Measured, Prediction, Ranked
from engine.wire import advise as wire
from engine.wire.codec import WireError


def read_advice(data) -> Advice | None:
    """``advice_json``'s object as an Advice; None where it is not one (no choice, another shape)."""
    try:
        answer = wire.read(data)
    except WireError:
        return None
    chosen = answer.choice
    if chosen is None:
        return None
    candidates = [read_ranked(row) for row in answer.candidates]
    # The choice and the runner-up as the very entries of the list: the table marks them by identity.
    by_label = {entry.label: entry for entry in candidates}
    choice = by_label.get(chosen.label) or read_ranked(chosen)
    return Advice(choice=choice, runner_up=by_label.get(chosen.runner_up) if chosen.runner_up else None,
                  tied=list(chosen.tied), why=chosen.why, run_args=list(answer.run_args), candidates=candidates,
                  notes=list(chosen.notes), batch_size=_batch_size(answer.run_args),
                  memory_limit_bytes=chosen.memory_limit_bytes, memory_limit_source=chosen.memory_limit_source,
                  probe_s=chosen.probe_s, check_s=chosen.check_s, elapsed_s=answer.elapsed_s)


def read_ranked(row: wire.CandidateRow) -> Ranked:
    """One candidate's row: the candidate, its prediction, and its check where it had one."""
    candidate = Candidate(row.strategy, row.devices, row.split, row.schedule, row.micro_batches,
                          row.stages_per_device)
    prediction = Prediction(step_s=row.predicted_step_s, compute_s=row.compute_s, communication_s=row.communication_s,
                            bubble=row.bubble, memory_bytes=row.memory_bytes, fits=row.fits, why=row.why)
    measured = None
    if row.run_id is not None or row.measured_step_s is not None or row.check_error is not None:
        measured = Measured(run_id=row.run_id, step_s=row.measured_step_s, step_std_s=row.measured_std_s,
                            throughput=row.measured_throughput, disturbed=row.disturbed, error=row.check_error)
    return Ranked(candidate, prediction, measured)


def _batch_size(run_args: list[str]) -> int:
    """The batch advised on: ``--batch-size`` of the run arguments (always there; 0 where unreadable)."""
    if "--batch-size" in run_args[:-1]:
        value = run_args[run_args.index("--batch-size") + 1]
        if value.isdigit():
            return int(value)
    return 0
