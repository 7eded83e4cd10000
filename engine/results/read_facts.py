"""A run summary's sections for what was read rather than configured (docs/summary.md): what a watched script
is (``ScriptFacts``, engine/watch/script_facts.py reads it), which profiler traces a run of kind trace was read
from (``TraceSource``, engine/traces/as_run.py) and the findings that explain a run's step
(``Finding``, engine/record/findings.py makes them). Plain data, like the rest of engine/results/."""
from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("info", "warning", "problem")


@dataclass(frozen=True)
class LoaderFacts:
    """The DataLoader a watched script's training batches came from, as the script made it."""
    batch_size: int | None = None
    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None


@dataclass(frozen=True)
class ScriptFacts:
    """What a watched script trains, read from it as it ran (its first rank's view)."""
    model: str | None = None              # the class of each module it trained ("GPT"; a GAN's two, joined)
    parameters: int | None = None         # their parameters together
    optimizers: list[str] = field(default_factory=list)    # the class of each optimizer that stepped
    lr: list[float | None] = field(default_factory=list)   # each one's learning rate at its last step
    dtype: str | None = None              # what its training forwards computed in (autocast's, else the model's)
    samples_source: str | None = None     # where a step's samples were counted from
    micro_steps: float | None = None      # backwards per step (gradient accumulation: more than 1)
    loader: LoaderFacts | None = None     # the DataLoader its training batches came from, if any
    output_tail: list[str] = field(default_factory=list)   # its last lines of output, where it took no step
    exit_code: int | None = None          # how its first rank's process ended, where it took no step
    hand_updates: bool = False            # no optimizer stepped: the script updated its parameters itself
    unread: str | None = None             # what of it could not be read, and why (the first such thing)

    @property
    def optimizer_text(self) -> str:
        """The summary's ``optimizer`` for a script: "AdamW", "Adam, Adam", or that none stepped."""
        if self.optimizers:
            return ", ".join(self.optimizers)
        return "none: parameters updated by the script" if self.hand_updates else "none: no parameters updated"


@dataclass(frozen=True)
class Finding:
    """One thing a run's figures say, or could not: ``code`` (engine/record/findings.py lists them), how much it
    matters, in words, and the devices it is about."""
    code: str
    severity: str
    text: str
    devices: list[str] = field(default_factory=list)
    share: float = 0.0   # how much of the step it explains (0..1): what orders the list


@dataclass(frozen=True)
class TraceSource:
    """Where a run of kind trace came from: a job's profiler traces read (File › Open traces…, ``trace --store``);
    the store keeps their figures and a few iterations' lanes, not the traces."""
    paths: list[str] = field(default_factory=list)    # the files and folders read, made absolute
    files: int = 0
    ranks: list[int] = field(default_factory=list)    # the ranks read (a device "rank N" each)
    world_size: int | None = None                     # as the traces said it
    iterations: str | None = None                     # "A:B" as asked, None for all
    kernel_delay_us: float = 30.0                     # the consecutive kernel delay the idle categories took
    lane_resolution_us: float = 0.0                   # the lanes' gaps under this joined (engine/traces/lanes.py)
