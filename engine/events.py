"""What the worker tells whoever runs it, typed: one event per line of JSON (docs/protocol.md).

The worker (engine.run.worker) makes these and writes them with ``engine.wire.worker.encode``;
the session (engine.run.session) reads them back with ``engine.wire.worker.decode``, stores
them and hands the same objects to its caller: the CLI's progress, an experiment,
the app. Every reader matches on the type; JSON exists only on the pipe between
the two processes. A merged step is ``engine.results.Step``, the row the store
keeps. Every event has ``t``: seconds since the run started (the session's clock).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.devices import Device
from engine.results import NodeSummary, RunSummary, Step


@dataclass(frozen=True, kw_only=True)
class Launched:
    """The rank processes exist (before torch is imported): telemetry follows their memory from here."""
    t: float
    pids: dict[str, int] = field(default_factory=dict)          # rank -> pid
    device_pids: dict[str, int] = field(default_factory=dict)   # device -> the process on it (none on nodes)
    devices: list[str] = field(default_factory=list)            # names, stage order
    nodes: list[NodeSummary] | None = None                      # a run over several machines


@dataclass(frozen=True, kw_only=True)
class Started:
    """Every rank is ready: what the run is, as the worker resolved it."""
    t: float
    pids: dict[str, int] = field(default_factory=dict)
    worker_pid: int | None = None
    devices: list[Device] = field(default_factory=list)
    device_pids: dict[str, int] = field(default_factory=dict)
    config: dict = field(default_factory=dict)                  # ExperimentConfig.to_dict()
    split: list[int] | None = None                              # the first block of each later stage
    world_size: int = 1
    micro_batches: int = 1
    clock_origin: float | None = None
    theory_bubble: float | None = None                          # engine.record.summary.theoretical_bubble
    theory_text: str | None = None                              # its formula with the values
    notes: list[str] = field(default_factory=list)
    plan: list[list[str]] | None = None                         # the schedule's action list per rank
    nodes: list[NodeSummary] | None = None
    # device -> {"measured": Peak, "datasheet": Peak or None} as JSON: its peak FLOP/s (engine/measure/peak.py)
    peaks: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Log:
    """A rank printed a line."""
    t: float
    message: str = ""
    rank: int | None = None


@dataclass(frozen=True, kw_only=True)
class Warned:
    """Something worth showing that does not end the run."""
    t: float | None
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class Errored:
    """A rank failed, hung or died, a node was lost, or the store failed: the run ends (Finished follows)."""
    t: float
    message: str = ""
    rank: int | None = None
    device: str | None = None
    node: str | None = None          # the node's label, when a node was lost or its torchrun failed
    traceback: str | None = None


@dataclass(frozen=True, kw_only=True)
class ProfileSaved:
    """A rank finished its --profile-steps: its torch.profiler trace file, which the session stores."""
    t: float
    rank: int
    device: str
    path: str
    t0: float                        # its first profiled step's start, run clock


@dataclass(frozen=True, kw_only=True)
class NodeSamples:
    """Telemetry a node's agent sampled: rows in DeviceSample's field order, t on the session's clock."""
    t: float
    rows: list[list] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Finished:
    """Always the last event. The worker's has the summary without telemetry; the session's own adds the
    telemetry section, ``run_id``, and the error that ended a failed run."""
    t: float
    status: str = "failed"                 # finished, failed, stopped
    summary: RunSummary | None = None
    run_id: str | None = None
    error: str | None = None
    traceback: str | None = None


WorkerEvent = Launched | Started | Step | Log | Warned | Errored | ProfileSaved | NodeSamples | Finished
TYPES: dict[str, type] = {"launched": Launched, "started": Started, "step": Step, "log": Log, "warning": Warned,
                          "error": Errored, "profile": ProfileSaved, "samples": NodeSamples, "finished": Finished}
NAMES: dict[type, str] = {kind: name for name, kind in TYPES.items()}
