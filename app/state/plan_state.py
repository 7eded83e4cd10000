"""What the planner knows of the configured experiment, without Qt: the check, the profiled blocks, the split.

The window's configuration changes often (every spin box step); each change asks the
planner process for a check, and for a profile of the model's blocks only when no
profile of the same model on the same kinds of device is kept already. ``PlanState``
holds the answers and says what the split view and the Run button should show;
``app/controllers/plan_flow.py`` carries them between the planner and the views.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from app.state.live_data import RunProgress
from app.state.problem_help import Help
from engine import devices as devices_mod
from engine.config import ExperimentConfig
from engine.planner import planning
from engine.planner.planning import BlockInfo
from engine.rules import effective_batch_size, effective_micro_batches
from engine.strategies import STRATEGIES
from engine.wire.planner import Profiled

# The check of the latest config: asked and not answered, passed, failed, or nobody to ask; or
# passed while the blocks its split needs are still being profiled (Run waits for them).
PENDING, OK, PROBLEMS, UNAVAILABLE, PROFILING = "pending", "ok", "problems", "unavailable", "profiling"

PROFILING_TEXT = "Profiling the model's blocks…"


@dataclass(frozen=True)
class BlockProfile:
    """A model's blocks as timed on the config's first kind of device, and every block's time per kind."""
    blocks: list[BlockInfo]
    costs_by_kind: dict[str, list[float]]

    @classmethod
    def from_answer(cls, answer: Profiled) -> BlockProfile | None:
        """The planner's profile (app/services/planner_service.py), or None when it has no blocks."""
        if not answer.blocks:
            return None
        return cls(list(answer.blocks), dict(answer.costs_by_kind or {"cpu": [b.cost_s for b in answer.blocks]}))

    def balanced(self, stage_kinds: list[str], stages: int) -> list[int] | None:
        """The split that balances ``stages`` stages, each costed on its own kind of device; None when the
        blocks cannot make that many stages. Kinds not settled yet (a devices box being typed) count as the
        first profiled kind for every stage."""
        if not 2 <= stages <= len(self.blocks):
            return None
        kinds = stage_kinds if len(stage_kinds) == stages else [next(iter(self.costs_by_kind))] * stages
        return list(planning.balanced_for_kinds(self.costs_by_kind, kinds))


@dataclass(frozen=True)
class PlannerRequest:
    """What to ask the planner: check ``config`` (a dict, as the protocol takes it), and profile it or not."""
    config: dict
    profile: bool
    stages: int | None


@dataclass
class PlanState:
    check: str = PENDING
    problems: list[Help] = field(default_factory=list)   # the latest config's, in the app's words
    profile_key: tuple | None = None                     # the model and device kinds in view
    profiles: dict[tuple, BlockProfile] = field(default_factory=dict)
    profile_error: str | None = None                     # why the blocks in view could not be profiled
    uses_split: bool = False                             # the latest config's strategy has split points
    skipped: bool = False   # the blocks in view are not to be timed (Skip, or a split chosen by their names)

    # -- the configuration changes ------------------------------------------------------------
    def select(self, key: tuple) -> tuple[bool, BlockProfile | None]:
        """The config now has profile ``key``: whether that is another model (or kinds of device) than
        before, and its blocks when they were profiled already."""
        changed = key != self.profile_key
        if changed:
            self.profile_key = key
            self.profile_error = None
            self.skipped = False
        return changed, self.profiles.get(key)

    @property
    def needs_profile(self) -> bool:
        return self.profile_key not in self.profiles

    @property
    def _split_needs_profile(self) -> bool:
        """The split is chosen on blocks not profiled yet, and profiling them has not failed."""
        return (self.uses_split and self.profile_key is not None and self.needs_profile
                and self.profile_error is None)

    @property
    def profiling(self) -> bool:
        """The blocks the split is chosen on are being profiled (resnet50's take 30-60 s on CPU devices)."""
        return self._split_needs_profile and not self.skipped

    @property
    def profile_action(self) -> str | None:
        """What the split view's profile button offers: "skip" while the blocks are to be profiled, "profile"
        once the user skipped it, None when there is nothing to profile."""
        if not self._split_needs_profile or self.check == UNAVAILABLE:
            return None
        return "profile" if self.skipped else "skip"

    @property
    def model_name(self) -> str | None:
        """The model in view, as the app names it: a zoo model's name, or a model file's name."""
        if self.profile_key is None:
            return None
        model, model_file = self.profile_key[0], self.profile_key[1]
        return os.path.basename(model_file) if model_file else model

    def ask(self, config: ExperimentConfig, quick_problems: list[Help], stages: int | None,
            planner_up: bool) -> PlannerRequest | None:
        """A check of ``config`` starts: the quick problems (engine.config's, no torch) show until the
        planner answers; None when there is no planner to ask (Run is then not held back)."""
        self.problems = list(quick_problems)
        strategy = STRATEGIES.get(config.strategy)
        self.uses_split = bool(strategy and strategy.uses_split)
        if not planner_up:
            self.check = UNAVAILABLE
            return None
        self.check = PENDING
        return PlannerRequest(config.to_dict(), self.needs_profile and not self.skipped, stages)

    def skip_profile(self) -> None:
        """The blocks are not to be timed: Run goes on now, with a split chosen by the blocks' names (without
        one, a run's rank 0 would time them itself before training: engine/run/rank.py resolve_split)."""
        self.skipped = True
        if self.check == PROFILING:
            self.check = OK

    def profile_again(self) -> None:
        self.skipped = False

    # -- the planner answers -----------------------------------------------------------------
    def checked(self, problems: list[Help]) -> None:
        self.problems = list(problems)
        self.check = PROBLEMS if problems else PROFILING if self.profiling else OK

    def profiled(self, answer: Profiled) -> BlockProfile | None:
        """The blocks of the model in view, kept for when it comes back; None (and the reason kept) on failure."""
        profile = BlockProfile.from_answer(answer)
        if self.check == PROFILING:  # the check passed; what it waited for is here (or never will be)
            self.check = OK
        if profile is None:
            # Run goes on without the blocks: the engine balances the split itself.
            self.profile_error = answer.error or "no blocks"
            return None
        self.profile_error = None
        self.profiles[self.profile_key] = profile
        return profile

    def planner_lost(self) -> None:
        self.check = UNAVAILABLE

    # -- what the views say -------------------------------------------------------------------
    def split_text(self, fraction: float | None = None) -> str:
        """What the split view says while it has no blocks to show; ``fraction``: how far the profile is."""
        if self.profile_error:
            return f"Could not profile the blocks: {self.profile_error}"
        if self.skipped:
            return "Blocks not timed (profiling skipped)"
        return PROFILING_TEXT + (f" {100 * fraction:.0f}%" if fraction is not None else "")

    def panel_problems(self) -> list[Help]:
        """The problems the experiment panel places by its options (the split's show under the split view)."""
        return [p for p in self.problems if p.option != "split"]

    def split_problems(self) -> list[Help]:
        """The problems the split view shows, with the fixes it applies itself."""
        return [p for p in self.problems if p.option == "split"]

    def split_problems_text(self) -> str:
        return "\n".join(f"--split: {p.message}" for p in self.problems if p.option == "split")


# -- what a config means for the split view, torch-free -----------------------------------------
def config_devices(config: ExperimentConfig) -> list[devices_mod.Device]:
    """The config's devices (every node's, with --nodes), or none while the spec is wrong (the check says why)."""
    from engine.run.resolved_run import run_devices  # torch-free at import
    try:
        return run_devices(config)
    except devices_mod.DeviceError:
        return []


def stage_count(config: ExperimentConfig, gpus: list) -> int | None:
    """How many devices (stages, for a split model) the config places work on; None while its spec is wrong.
    ``gpus``: the GPU inventory; torch numbers the ones CUDA sees cuda:0, cuda:1, ..."""
    from engine.run.resolved_run import run_devices  # torch-free at import
    try:
        # (with --nodes every node runs the devices: their GPUs are theirs, and ``gpus`` is not asked)
        return len(run_devices(config, gpus=len(devices_mod.cuda_visible(gpus))))
    except devices_mod.DeviceError:
        return None


def micro_batch_size(config: ExperimentConfig) -> float:
    return effective_batch_size(config) / max(1, effective_micro_batches(config))


def profile_key(config: ExperimentConfig) -> tuple:
    """What the block timings depend on: the model (a file's, as of its last change), its size, the batch,
    and the kinds of device that time it."""
    mtime = None
    if config.model_file:
        try:
            mtime = os.path.getmtime(config.model_file)
        except OSError:
            mtime = None
    mlp = config.model == "mlp"
    # The split level and image size change which submodules are the blocks, and what they cost.
    return (config.model, config.model_file, mtime, config.width if mlp else None, config.depth if mlp else None,
            config.split_level, config.image_size,
            effective_batch_size(config), tuple(sorted({d.kind for d in config_devices(config)})))


def preview_run(progress: RunProgress, config: ExperimentConfig, stages: int) -> None:
    """Before the first run the bubble box shows the theory for the configured experiment: ``progress``
    (the live view's run's progress, no run in it) takes the config's split, micro-batches and figure."""
    progress.config = config
    progress.devices = []
    progress.split = list(config.split) if config.split else ([0] * (stages - 1) if stages > 1 else None)
    progress.micro_batches = effective_micro_batches(config)
    configured_theory(progress, config)


def configured_theory(progress: RunProgress, config: ExperimentConfig) -> None:
    """``progress`` takes the theory of ``config`` as configured: before a run, and for a run until its worker's
    `started` event brings the theory of what it launched."""
    progress.theory, progress.theory_text, progress.notes = None, None, []
    devices = config_devices(config)
    if STRATEGIES.get(config.strategy) is not None and devices:
        from engine.run.resolved_run import resolve  # torch-free at import
        resolved = resolve(config, devices)
        progress.theory, progress.theory_text = resolved.theory_bubble, resolved.theory_text
        progress.notes = list(resolved.theory_notes)


# Two stages whose balanced split still leaves 70 % of the time to one: the blocks are too coarse to balance.
UNEVEN_SHARE = 0.7


def coarse_blocks_hint(shares: list[dict]) -> str | None:
    """A hint under the split view when even the balanced split leaves one stage far more than its part of
    the time (70/30 for two stages; for s stages, 1.4 times 1/s): finer blocks, one level deeper, can."""
    if len(shares) < 2:
        return None
    slowest = max(range(len(shares)), key=lambda s: shares[s]["time"])
    share = shares[slowest]["time"]
    if share <= UNEVEN_SHARE * 2 / len(shares):
        return None
    return (f"Stage {slowest} takes {100 * share:.0f}% of the time even at the balanced split: its blocks are "
            "too coarse. Split one level deeper (Split at) for smaller blocks, where the model has them.")
