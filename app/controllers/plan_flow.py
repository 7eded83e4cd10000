"""PlanFlow: from a change of the experiment's settings to its check, its blocks and its split.

Every change asks the planner process (app/services/planner_client.py) to check the
config, and to profile the model's blocks when they are not known for this model and
these kinds of device (app/state/plan_state.py keeps them). Problems go under the
experiment panel's options and the split view, in the app's words and with the fixes
the views apply (app/state/problem_help.py); the blocks, with the balanced split for
the configured devices, go to the split view; the bubble box previews the theory
until a run gives a measurement. The check lives in the app's model (``model.plan``,
app/state/app_model.py), which announces each change: the Run button follows it, and
waits for the blocks a split is chosen on (app/controllers/run_controls.py).
"""
from __future__ import annotations

from PySide6 import QtCore

from app.controllers.window_port import WindowPort
from app.services.planner_client import PlannerClient
from app.state import plan_state, problem_help
from app.state.app_model import AppModel
from app.state.plan_state import BlockProfile
from app.state.problem_help import Help
from engine import rules
from engine.config import ExperimentConfig
from engine.devices import cuda_visible
from engine.models import MODELS
from engine.problems import Problem
from engine.rules import effective_stages_per_device
from engine.strategies import STRATEGIES
from engine.strategies.pipeline.staged import stage_devices
from engine.wire.planner import Checked, Profiled


class PlanFlow(QtCore.QObject):
    sigChecked = QtCore.Signal(list)    # problems of the latest config (problem_help.Help); [] when valid
    sigProfiled = QtCore.Signal()       # the split view shows the blocks, or why there are none

    def __init__(self, model: AppModel, port: WindowPort, split_view, panel, center,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.model, self.port = model, port
        self.split_view = split_view
        self.panel = panel          # app/views/experiment_panel.py: the settings, and their problems under them
        self.center = center        # app/views/center_area.py: the bubble box's preview
        self.state = model.plan     # what the planner answered: this flow changes it, and announces each change
        self.planner = PlannerClient.taken(self)   # app.application started one while the window was built
        self.planner.sigChecked.connect(self._on_checked)
        self.planner.sigProfiled.connect(self._on_profiled)
        self.planner.sigProfiling.connect(self._on_profiling)
        self.planner.sigCrashed.connect(self._on_planner_crashed)
        self.planner.sigReady.connect(lambda: model.log("planner ready (validation and block profiling)"))
        split_view.sigSplitChanged.connect(self._on_split_changed)
        split_view.sigSkipProfile.connect(self._skip_profile)
        split_view.sigProfileAgain.connect(self._profile_again)

    def start(self) -> None:
        self.planner.start()
        self.config_changed()

    def close(self) -> None:
        self.planner.close()

    # -- the settings change -------------------------------------------------------------------
    def config_changed(self) -> None:
        config = self.port.panel_config()
        strategy = STRATEGIES.get(config.strategy)
        stages = (plan_state.stage_count(config, self.model.gpus) or 2) * effective_stages_per_device(config)
        view = self.split_view
        view.set_context(bool(strategy and strategy.uses_split), stages, plan_state.micro_batch_size(config))
        model = MODELS.get(config.model) if not config.model_file else None
        view.set_tutorial_split(model.tutorial_split if model else None)
        changed, profile = self.state.select(plan_state.profile_key(config))
        if changed:
            if profile is not None:
                self._show_blocks(profile, keep_choice=False)
            else:
                view.clear_blocks(self.state.split_text())
        elif profile is not None and view.blocks:
            # The stages' devices may have changed: the balanced split follows; a split the user chose stays.
            self._show_blocks(profile, keep_choice=view.balanced is not None and view.split() != view.balanced)
        self.request_check()
        self._preview_bubble()

    def request_check(self) -> None:
        config = self.port.current_config()
        quick = self._explained(rules.problems(config),
                                config)
        request = self.state.ask(config, quick, self.split_view.stages, self.planner.started)
        self._show_problems()
        if request is not None:
            self.planner.request(request.config, profile=request.profile, stages=request.stages)
        self.split_view.show_profile_action(self.state.profile_action)
        self.model.plan_changed()

    def _on_split_changed(self) -> None:
        view = self.split_view
        if not view.blocks and view.split() is not None and self.state.profiling:
            # Chosen by the blocks' names (the tutorial's) while they were timed: the timing stops, rather than
            # restart with this check or take the run's cores; "Time blocks" asks for it again.
            self._skip_profile()
            return
        self.request_check()

    def _skip_profile(self) -> None:
        """No timing of the blocks: a request without a profile supersedes the running one (the planner ends
        it), and a split by the blocks' names is chosen if none is (an even one by count)."""
        self.state.skip_profile()
        view = self.split_view
        view.show_waiting(self.state.split_text())
        if view.split() is None and view.even_split() is not None:
            view.use_even_split()   # its sigSplitChanged asks the check
        else:
            self.request_check()

    def _profile_again(self) -> None:
        self.state.profile_again()
        self.split_view.show_waiting(self.state.split_text())
        self.request_check()

    def _preview_bubble(self) -> None:
        """Before the first run, the bubble box shows the theory for the configured experiment."""
        progress = self.center.run_progress()
        if progress.run_id is not None or self.model.is_busy():
            return
        config = self.port.current_config()
        plan_state.preview_run(progress, config, plan_state.stage_count(config, self.model.gpus) or 0)
        self.center.refresh_bubble()

    def _show_blocks(self, profile: BlockProfile, keep_choice: bool) -> None:
        """The blocks in the split view, with the balanced split for the configured stage devices."""
        view = self.split_view
        balanced = None
        if view.uses_split:
            config = self.port.panel_config()
            kinds = [d.kind for d in stage_devices(config, plan_state.config_devices(config),
                                                      effective_stages_per_device(config))]
            balanced = profile.balanced(kinds, view.stages)
        view.blockSignals(True)  # the check that follows is asked once, by the caller
        try:
            view.set_blocks(profile.blocks, balanced, keep_choice=keep_choice)
        finally:
            view.blockSignals(False)

    def _explained(self, problems: list[Problem], config: ExperimentConfig) -> list[Help]:
        """``problems`` in the app's words, with their fixes (app/state/problem_help.py)."""
        view = self.split_view
        return problem_help.explain_all(problems, config, gpus=len(cuda_visible(self.model.gpus)),
                                        n_blocks=len(view.blocks) or None, balanced=view.balanced)

    def _show_problems(self) -> None:
        # The split's problems under the split view, with the fixes it applies; the window's line under
        # it stays empty.
        self.panel.show_problems(self.state.panel_problems())
        self.split_view.show_problems(self.state.split_problems())

    # -- the planner answers --------------------------------------------------------------------
    def _on_checked(self, _request_id: int, answer: Checked) -> None:
        self.state.checked(self._explained(answer.problems, self.port.current_config()))
        if not self.split_view.blocks and answer.block_names:  # a check with problems has none
            self.split_view.set_names(list(answer.block_names))
        self._show_problems()
        self.panel.show_check(self.state.problems, list(answer.block_names or []))
        for warning in answer.warnings:
            self.model.log(f"warning: {warning}", level="warning")
        self.model.plan_changed()
        self.sigChecked.emit(self.state.problems)

    def _on_profiling(self, _request_id: int, fraction: float) -> None:
        """A heavy model's profile says how far it is: the split view, still without blocks, says it too."""
        if not self.split_view.blocks:
            self.split_view.show_waiting(self.state.split_text(fraction))

    def _on_profiled(self, _request_id: int, answer: Profiled) -> None:
        profile = self.state.profiled(answer)
        if profile is None:
            self.split_view.show_waiting(self.state.split_text())   # the names and a split chosen by them stay
            self.split_view.show_profile_action(self.state.profile_action)
            self.model.log(f"block profiling failed: {self.state.profile_error}", level="warning")
            self.model.plan_changed()   # Run waited for the blocks; the engine balances the split
            self.sigProfiled.emit()
            return
        # A split the user chose by the blocks' names stays; otherwise (none, or the even one Skip chose) the
        # balanced one is preselected.
        view = self.split_view
        self._show_blocks(profile, keep_choice=view.split() is not None and not view.split_is_automatic)
        view.show_profile_action(self.state.profile_action)
        self.sigProfiled.emit()
        # The split view now holds an explicit split (the balanced one): check that config.
        self.request_check()

    def _on_planner_crashed(self, message: str) -> None:
        self.model.log(message, level="error")
        self.state.planner_lost()
        self.model.plan_changed()
