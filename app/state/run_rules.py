"""When Run is blocked, and why: the rules of the run controls, without Qt (tests call them directly).

One run, one experiment or one advise at a time (they share the devices); a configuration
with problems does not run; nor one whose split waits for the model's blocks to be profiled
(``plan_state.PROFILING``): the user would run a split they have not seen. Run can be clicked
while the planner still checks the configuration (the first check waits for the planner's torch
import, seconds after the window shows): the run then waits for the check
(``Activity.waiting_check``) and starts once it passes, or not at all when it finds problems.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.state.problem_help import Help


@dataclass(frozen=True)
class Activity:
    """What the app is doing: a run, an experiment, an advise (its probe and checking runs), and whether a stop
    was asked."""
    run: bool = False
    experiment: bool = False
    stopping: bool = False
    advise: bool = False
    waiting_check: bool = False   # Run was clicked while the planner checked: the run starts once the check passes

    @property
    def busy(self) -> bool:
        return self.run or self.experiment or self.advise


def blocked_reason(activity: Activity, problems: list[Help], check_state: str,
                   model: str | None = None) -> str | None:
    """Why Run is disabled, or None when it is enabled. ``problems``: the check's, in the app's words
    (app/state/problem_help.py); ``check_state``: "pending"
    while the planner checks, "profiling" while the blocks the split needs are profiled, "ok", "problems" or
    "unavailable" (Run waits for a pending check: ``Activity.waiting_check``); ``model``: the name of the model being profiled."""
    if activity.run:
        return "Stopping the run…" if activity.stopping else "A run is in progress."
    if activity.experiment:
        return "Stopping the experiment…" if activity.stopping else "An experiment is in progress."
    if activity.advise:
        return "Stopping advise…" if activity.stopping else "Advise is probing and checking candidates (Esc stops)."
    if activity.waiting_check:
        return "Run starts once the configuration is checked (Esc cancels)."
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"Cannot run: {first.text}{more}"
    if check_state == "profiling":
        whose = f"{model}'s" if model else "the model's"
        return f"Profiling {whose} blocks for the split… (Skip, above the split points, lets Run start now)"
    return None


def ready_text(reason: str | None, check_state: str) -> str:
    """The line under the Run button."""
    if reason is None and check_state == "unavailable":
        return "Validation is unavailable (planner process not running); the worker will check."
    if reason is None and check_state == "pending":
        return "Checking the configuration… (Run now starts it once the check passes)"
    return reason or "Ready: Ctrl+R runs, Esc stops."
