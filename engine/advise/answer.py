"""``main.py advise --json``'s answer read back into the typed results (engine/advise/results.py): the inverse of
command.py's ``advice_json``, for a process that ran advise as its child (the app's Advise,
app/services/advise_client.py).

Torch-free. Each candidate is read field by field through engine.results.from_json, so a value of the wrong kind
is treated as missing; a candidate that cannot be read is left out, and an answer without a readable choice is
None.
"""
from __future__ import annotations

from engine.advise.results import Advice, Candidate, Measured, Prediction, Ranked
from engine.results import from_json


def read_advice(data) -> Advice | None:
    """``advice_json``'s object as an Advice; None where it is not one (no choice, no candidates list)."""
    if not isinstance(data, dict) or not isinstance(data.get("candidates"), list):
        return None
    chosen = data.get("choice")
    choice = read_ranked(chosen)
    if choice is None:
        return None
    candidates = [entry for entry in map(read_ranked, data["candidates"]) if entry is not None]
    # The choice and the runner-up as the very entries of the list: the table marks them by identity.
    by_label = {entry.label: entry for entry in candidates}
    choice = by_label.get(choice.label, choice)
    run_args = [str(arg) for arg in _list(data.get("run_args"))]
    return Advice(choice=choice, runner_up=by_label.get(chosen.get("runner_up")),
                  tied=[str(label) for label in _list(chosen.get("tied"))], why=str(chosen.get("why") or ""),
                  run_args=run_args, candidates=candidates, notes=[str(n) for n in _list(chosen.get("notes"))],
                  batch_size=_batch_size(run_args),
                  memory_limit_bytes=_number(chosen.get("memory_limit_bytes"), int),
                  memory_limit_source=str(chosen.get("memory_limit_source") or ""),
                  probe_s=_number(chosen.get("probe_s")), check_s=_number(chosen.get("check_s")),
                  elapsed_s=_number(data.get("elapsed_s")))


def read_ranked(row) -> Ranked | None:
    """One of ``candidate_json``'s objects: the candidate, its prediction, and its check where it had one."""
    if not isinstance(row, dict):
        return None
    candidate = from_json(Candidate, row)
    prediction = from_json(Prediction, {"step_s": row.get("predicted_step_s"),
                                        "compute_s": row.get("compute_s", 0.0),   # older answers lack it
                                        **{key: row.get(key) for key in ("communication_s", "bubble",
                                                                         "memory_bytes", "fits", "why")}})
    if candidate is None or prediction is None:
        return None
    measured = None
    if any(row.get(key) is not None for key in ("run_id", "measured_step_s", "check_error")):
        measured = from_json(Measured, {"run_id": row.get("run_id"), "step_s": row.get("measured_step_s"),
                                        "step_std_s": row.get("measured_std_s"),
                                        "throughput": row.get("measured_throughput"),
                                        "disturbed": row.get("disturbed"), "error": row.get("check_error")})
    return Ranked(candidate, prediction, measured)


def _batch_size(run_args: list[str]) -> int:
    """The batch advised on: ``--batch-size`` of the run arguments (always there; 0 where unreadable)."""
    if "--batch-size" in run_args[:-1]:
        value = run_args[run_args.index("--batch-size") + 1]
        if value.isdigit():
            return int(value)
    return 0


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _number(value, kind=float):
    return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else kind(0)
