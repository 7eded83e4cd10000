"""``main.py advise --json``'s answer (docs/advise.md): what advise writes (engine/advise/command.py
``advice_json``) and what a process that ran it as its child reads back (engine/advise/answer.py ``read_advice``,
for the app's Advise: app/services/advise_client.py).

A candidate is one flat row: the candidate as ``main.py run`` takes it, its prediction, and its check where it had
one. The choice is its row with what advise says of it. Read strictly (engine/wire/codec.py): an answer of
another shape is refused whole, naming the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.wire import codec

CHANNEL = "advise's answer"


@dataclass(frozen=True)
class CandidateRow:
    label: str
    strategy: str
    devices: str
    predicted_step_s: float
    bubble: float
    communication_s: float
    memory_bytes: int
    fits: bool
    why: str
    split: list[int] | None = None
    schedule: str | None = None
    micro_batches: int | None = None
    stages_per_device: int | None = None
    predicted_throughput: float | None = None
    measured_step_s: float | None = None
    measured_std_s: float | None = None
    measured_throughput: float | None = None
    run_id: str | None = None
    disturbed: str | None = None
    check_error: str | None = None
    prediction_error: float | None = None
    compute_s: float = 0.0             # older answers lack it


@dataclass(frozen=True)
class ChoiceRow(CandidateRow):
    """The chosen candidate's row; its ``why`` is why it was chosen."""
    runner_up: str | None = None       # its label
    tied: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memory_limit_bytes: int = 0
    memory_limit_source: str = ""
    probe_s: float = 0.0
    check_s: float = 0.0


@dataclass(frozen=True)
class AdviceAnswer:
    choice: ChoiceRow | None
    candidates: list[CandidateRow]
    run_args: list[str] = field(default_factory=list)
    predicted_step_s: float | None = None
    measured_step_s: float | None = None
    elapsed_s: float = 0.0


def read(data) -> AdviceAnswer:
    """The answer in ``data`` (parsed JSON); codec.WireError naming the field where it is of another shape."""
    return codec.typed(AdviceAnswer, data, CHANNEL)
