"""What a run and an experiment produce, typed (docs/summary.md).

Everything past the wire and the store reads these attributes; JSON exists only at those
boundaries (``to_json``, ``from_json``: stored_json.py). A run's summary and steps are in
run_summary.py, its efficiency section in efficiency.py, what was read of a script or of traces and
the findings in read_facts.py, an experiment's results in experiment_result.py; they are named
here so that a reader imports ``engine.results`` and not the room's layout.
"""
from engine.results.efficiency import Efficiency
from engine.results.experiment_result import ExperimentPlan, ExperimentPoint, ExperimentResult, PlannedPoint, mean_std
from engine.results.read_facts import Finding, LoaderFacts, ScriptFacts, TraceSource
from engine.results.run_summary import (
    BatchSplit,
    Bubble,
    Communication,
    DeviceKinds,
    Loss,
    MeanStd,
    NodeSummary,
    RunSummary,
    Sample,
    SplitCost,
    Step,
    TensorMemory,
    Traffic,
)
from engine.results.stored_json import from_json, to_json
from engine.telemetry.summary import TelemetrySummary

__all__ = [
    "BatchSplit", "Bubble", "Communication", "DeviceKinds", "Efficiency", "ExperimentPlan", "ExperimentPoint",
    "ExperimentResult", "Finding", "LoaderFacts", "Loss", "MeanStd", "NodeSummary", "PlannedPoint", "RunSummary",
    "Sample", "ScriptFacts", "SplitCost", "Step", "TelemetrySummary", "TensorMemory", "TraceSource", "Traffic",
    "from_json", "mean_std", "to_json",
]
