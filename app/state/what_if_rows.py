"""The what-if table's measured column: the runs this window made of what-if rows (and the run each table comes
from), by what they ran, so that a row's prediction reads beside the step its run measured, with the error and
its sign. No Qt: app/controllers/what_if_flow.py keeps one, app/views/plan_view.py draws its rows."""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import ExperimentConfig
from engine.results import RunSummary

# What a row changes, and what changes no step time: runs that differ only in these are of one what-if table.
ROW_FIELDS = ("strategy", "schedule", "stages_per_device", "micro_batches", "split_size", "split", "steps", "warmup",
              "profile_steps", "profile_from", "timeline", "hang_timeout_s", "seed", "lr", "peak", "token_file")


@dataclass(frozen=True)
class MeasuredRow:
    """A run of a row's configuration: its mean step, and why its times may not compare (a disturbance)."""
    run_id: str
    step_s: float
    disturbed: str | None = None

    def error(self, predicted_s: float) -> float:
        """The prediction's error over the measured step, signed: + where the prediction was slower than the run."""
        return (predicted_s - self.step_s) / self.step_s


def base_of(config: ExperimentConfig) -> tuple:
    """What a what-if table holds fixed: the model, the devices, the batch, the precision, the input..."""
    return tuple(sorted((k, repr(v)) for k, v in config.to_dict().items() if k not in ROW_FIELDS))


def row_of(summary: RunSummary, config: ExperimentConfig) -> tuple[str, int, int] | None:
    """(schedule, stages per device, micro-batches) as the run ran them; None for a run not split into stages (the
    naive split is gpipe's with one micro-batch)."""
    if not summary.split or not summary.devices:
        return None
    per_device = max(1, (len(summary.split) + 1) // len(summary.devices))
    return summary.schedule or config.schedule or "gpipe", per_device, summary.micro_batches or 1


class MeasuredRows:
    def __init__(self):
        self._runs: dict[tuple, MeasuredRow] = {}

    def add(self, run_id: str, config: ExperimentConfig, summary: RunSummary | None) -> None:
        """A finished run: the newest of a configuration is the one its row shows."""
        row = row_of(summary, config) if summary is not None else None
        if row is None or summary.step_time_s is None:
            return
        disturbed = summary.telemetry.disturbed if summary.telemetry is not None else None
        self._runs[(base_of(config), *row)] = MeasuredRow(run_id, summary.step_time_s.mean, disturbed)

    def of(self, config: ExperimentConfig, prediction) -> MeasuredRow | None:
        """The run of ``prediction``'s row (engine.planner.what_if.Prediction) from the table of ``config``'s run."""
        return self._runs.get((base_of(config), prediction.schedule, prediction.stages_per_device,
                               prediction.micro_batches))

    def same_table(self, one: ExperimentConfig, other: ExperimentConfig) -> bool:
        return base_of(one) == base_of(other)
