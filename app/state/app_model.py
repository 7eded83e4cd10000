"""AppModel: what the app is doing and knows, without Qt, and named events that say what changed.

As napari's evented models do (``model.events.status.connect(...)``), each part of the state
has an event (an Announcer, app/state/announcer.py): a controller (app/controllers/) changes
the model and whatever shows that part follows its event, so the controller never calls the
view that shows it. The window (app/main_window.py) makes the model and connects its views:
the status line follows ``status``, the Log ``logged``, the history ``stored`` and
``experiment``; the run controls (app/controllers/run_controls.py) follow ``activity`` and
``plan``, the close that waits for a run (app/controllers/close_flow.py) ``ended``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from app.state import run_rules
from app.state.announcer import Announcer
from app.state.live_data import TelemetryHistory
from app.state.plan_state import PlanState
from app.state.run_rules import Activity

WORK_KINDS = ("run", "experiment", "advise")   # what holds the devices, one at a time (run_rules.Activity)


@dataclass(frozen=True)
class AppEvents:
    """The model's events, each announcing the new value (listeners run on the UI thread, in connect order)."""
    status: Announcer = field(default_factory=Announcer)     # (text): the status line's new text
    logged: Announcer = field(default_factory=Announcer)     # (text, level): a line for the Log
    activity: Announcer = field(default_factory=Announcer)   # (Activity): work began, was asked to stop, or ended
    plan: Announcer = field(default_factory=Announcer)       # (PlanState): the check or the blocks changed
    ended: Announcer = field(default_factory=Announcer)      # (): a run or an experiment is over, its end shown
    stored: Announcer = field(default_factory=Announcer)     # (): a run was stored (or recovered): list it
    experiment: Announcer = field(default_factory=Announcer)  # (id or None): the experiment in the store now
    store: Announcer = field(default_factory=Announcer)      # (StoreNotice or None): what is wrong with the store


class AppModel:
    """The app's state: what holds the devices (a run, an experiment, an advise), the plan of the configured
    experiment, the experiment in the store, the store's status, the status line; and where the runs are stored
    and how often devices are sampled. The live run's progress (RunProgress) stays with the live view that draws
    it (app/views/center_area.py ``run_progress``) and announces its own events (``applied``)."""

    def __init__(self, telemetry: TelemetryHistory, db_path: str, telemetry_hz: float):
        self.events = AppEvents()
        self.telemetry = telemetry          # every device's samples: what the telemetry plots draw
        self.db_path = db_path              # the run store the window's processes write to
        self.telemetry_hz = telemetry_hz
        self.plan = PlanState()             # the planner's check, the blocks and the split (app/state/plan_state.py)
        self.activity = Activity()          # a run, an experiment or an advise, and whether its stop was asked
        self.experiment_id: str | None = None   # the experiment going, once the store has it
        self.store_notice: Any = None       # app/services/window_store.py StoreNotice: a damaged or unopened store
        self.gpus: list = []                # the GPU inventory (GpuInfo): torch numbers the visible ones cuda:0, ...
        self.status = "Ready"
        self.closing = False                # a close waits for the run or the experiment to end

    # -- what the user reads --------------------------------------------------------------------------
    def set_status(self, text: str) -> None:
        self.status = text
        self.events.status.announce(text)

    def log(self, text: str, status: bool = False, level: str = "info") -> None:
        """A line in the Log ("warning" and "error" in their colours); ``status``: on the status line too."""
        self.events.logged.announce(text, level)
        if status:
            self.set_status(text)

    # -- what holds the devices ---------------------------------------------------------------------
    def begin(self, kind: str) -> None:
        """A run, an experiment or an advise (``WORK_KINDS``) has started."""
        if kind not in WORK_KINDS:
            raise ValueError(f"unknown work {kind!r}: one of {', '.join(WORK_KINDS)}")
        self._set_activity(Activity(**{kind: True}))

    def wait_for_check(self, waiting: bool = True) -> None:
        """Run was clicked while the planner checks the configuration: the run starts once the check passes
        (``waiting`` False: it no longer waits, started, cancelled or refused)."""
        if self.activity.waiting_check != waiting:
            self._set_activity(replace(self.activity, waiting_check=waiting))

    def stop_asked(self) -> None:
        self._set_activity(replace(self.activity, stopping=True))

    def end(self) -> None:
        """Nothing holds the devices (announced even when nothing did: whoever follows looks again)."""
        self._set_activity(Activity())

    def work_ended(self) -> None:
        """A run or an experiment is over and its end is shown: the controls come back (unless ``end`` gave them
        back already, so that a run's listeners found them back), then ``ended``."""
        if self.activity != Activity():
            self.end()
        self.events.ended.announce()

    def _set_activity(self, activity: Activity) -> None:
        self.activity = activity
        self.events.activity.announce(activity)

    @property
    def busy(self) -> bool:
        """A run, an experiment or an advise holds the devices."""
        return self.activity.busy

    def is_busy(self) -> bool:
        """A run or an experiment is going (an advise is not: closing the window simply ends it)."""
        return self.activity.run or self.activity.experiment

    def blocked_reason(self) -> str | None:
        """Why Run is disabled, or None when it is enabled (app/state/run_rules.py)."""
        plan = self.plan
        return run_rules.blocked_reason(self.activity, plan.problems, plan.check, plan.model_name)

    # -- the plan, the store, the experiment ------------------------------------------------------------
    def plan_changed(self) -> None:
        """``plan`` was asked, answered, profiled or lost its planner."""
        self.events.plan.announce(self.plan)

    def run_stored(self) -> None:
        self.events.stored.announce()

    def set_experiment(self, experiment_id: str | None) -> None:
        self.experiment_id = experiment_id
        self.events.experiment.announce(experiment_id)

    def set_store_notice(self, notice: Any) -> None:
        self.store_notice = notice
        self.events.store.announce(notice)
