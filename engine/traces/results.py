"""What reading a job's traces gives, typed (docs/traces.md). Plain data, as engine/results/'s are: JSON only
at the boundaries (``engine.results.to_json`` / ``from_json``). Times in µs, as the traces keep them; shares in
percent of the GPU's span, as HTA gives them."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.results.read_facts import Finding


@dataclass(frozen=True)
class Collective:
    """One kind of NCCL kernel on a rank: how often it ran and for how long, with what Kineto said of it."""
    kernel: str                       # the kernel's name up to its arguments
    collective: str | None = None     # Kineto's "Collective name" (allreduce, ...), where recorded
    calls: int = 0
    total_us: float = 0.0
    elements: int | None = None       # "In msg nelems" (the larger of in and out) of its last call, where recorded
    dtype: str | None = None
    group_size: int | None = None


@dataclass(frozen=True)
class CpuOp:
    name: str
    calls: int
    total_us: float


@dataclass(frozen=True)
class RankFigures:
    """One rank's figures, over the kept GPU events of the iterations chosen (HTA's definitions:
    engine/traces/figures.py)."""
    rank: int
    file: str
    rank_from: str                    # "distributedInfo", "file name" or "order given"
    kernel_us: float = 0.0            # the GPU's span: first kernel's start to last kernel's end
    idle_us: float = 0.0
    compute_us: float = 0.0
    non_compute_us: float = 0.0
    idle_pct: float = 0.0
    compute_pct: float = 0.0
    non_compute_pct: float = 0.0
    comm_comp_overlap_pct: float | None = None     # None: no communication kernel
    idle_by_stream_category_us: dict[str, dict[str, float]] = field(default_factory=dict)
    top_idle_category: str | None = None           # over the streams' idle time
    top_idle_category_pct: float = 0.0
    kernel_type_us: dict[str, float] = field(default_factory=dict)
    kernel_type_pct: dict[str, float] = field(default_factory=dict)
    wait_at_collectives_us: float = 0.0            # its NCCL kernels' time before the last rank arrived (Straggler)
    gpu_events: int = 0                            # kept (after HTA's filter and the iterations chosen)
    gpu_events_read: int = 0
    streams: list[int] = field(default_factory=list)
    cpu_ops: int = 0
    top_cpu_ops: list[CpuOp] = field(default_factory=list)
    launches: int = 0                              # CPU events with a correlation (CUDA runtime and driver calls)
    profiler_steps: list[int] = field(default_factory=list)   # every ProfilerStep#N found
    left_out_step: int | None = None               # the last one, whose kernels HTA's default leaves out
    collectives: list[Collective] = field(default_factory=list)


@dataclass(frozen=True)
class RankIteration:
    rank: int
    kernel_us: float = 0.0
    idle_pct: float = 0.0
    compute_pct: float = 0.0
    non_compute_pct: float = 0.0
    wait_at_collectives_us: float = 0.0


@dataclass(frozen=True)
class IterationFigures:
    """One ProfilerStep#N across the ranks read."""
    iteration: int
    ranks: list[RankIteration] = field(default_factory=list)
    job_idle_pct: float | None = None      # of its span (first kernel of any rank to last), the time no rank's GPU
                                           # is busy, on the clocks the traces recorded
    span_us: float = 0.0
    straggler: int | None = None           # the rank whose late arrival at its collectives set the most wait
    wait_set_us: float = 0.0               # the other ranks' wait that straggler set


@dataclass(frozen=True)
class Straggler:
    """The rank that the others waited for at collectives, over the iterations: at each collective (NCCL kernels
    of one iteration, stream and name on several ranks whose ends coincide), the rank whose kernel started last arrived
    last: each other rank's kernel had started earlier and waited for it (a collective's kernels end together),
    from its own start to the last one's. The straggler is the rank that set the most of that wait."""
    rank: int
    iterations: list[int] = field(default_factory=list)   # where it set the most wait
    wait_set_us: float = 0.0              # the others' wait it set, over the iterations chosen
    wait_set_pct: float = 0.0             # that, as a share of all wait at collectives
    compute_us: float = 0.0               # its compute over those iterations ...
    median_compute_us: float = 0.0        # ... and the ranks' median: more means it was late from computing
    text: str = ""


@dataclass(frozen=True)
class TraceJob:
    """A job's traces read: its ranks' figures, by iteration, across ranks, and what they say."""
    ranks: list[RankFigures] = field(default_factory=list)
    kernel_type_pct: dict[str, float] = field(default_factory=dict)   # over every rank read (HTA's breakdown)
    iterations: list[IterationFigures] = field(default_factory=list)
    straggler: Straggler | None = None
    findings: list[Finding] = field(default_factory=list)
    world_size: int | None = None
    missing_ranks: int = 0                 # of the world size, ranks whose traces were not given
    iterations_chosen: str | None = None   # "A:B" as asked, None for all
    consecutive_kernel_delay: float = 30.0
    collectives_matched: int = 0           # NCCL kernels matched across ranks (see Straggler)
    notes: list[str] = field(default_factory=list)
