"""Why a run failed: every cause the worker sees while the ranks go down, and the one it reports.

A first failure is rarely the only sign of its cause: a rank killed by a signal
makes its peers' collectives fail too, a lost machine takes its ranks with it.
The worker notes each cause as it comes (``noted``), looks for more for
``CAUSE_SETTLE_S`` (``Failure.settled``) and reports the one that explains the
rest (``Failure.root``): a lost node, then a rank killed by a signal, a hang, a
rank's own error, any other exit.
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Any

from engine.run.heartbeat import START_UP, silent_after

CAUSE_SETTLE_S = 0.5   # after a first failure, how long to look for its root cause among the ranks
_PRIORITY = {"node": -1, "exit": 3, "hang": 1, "error": 2}
START_UP_ALLOWANCE_S = 180.0   # our own start (importing torch, the rendezvous) on a busy machine: heartbeat.START_UP


def hang_limit(rank, hang_timeout_s: float) -> float:
    """How long ``rank`` may go without progress: the hang timeout, or in our own start-up the allowance for it
    when that is longer."""
    return max(hang_timeout_s, START_UP_ALLOWANCE_S) if rank.phase in START_UP else hang_timeout_s


def hung_rank(ranks, now: float, hang_timeout_s: float):
    """The rank that holds the others up: the one whose heartbeat stopped first (stopped, or stuck holding
    Python's lock: its peers still beat while they wait for it), else one not waiting in torch.distributed,
    else the one furthest behind."""
    waiting = [r for r in ranks if not r.done] or list(ranks)
    mute = [r for r in waiting if r.alive_at is not None and now - r.alive_at > silent_after(hang_timeout_s)]
    if mute:
        return min(mute, key=lambda r: r.alive_at)
    outside = [r for r in waiting if not r.in_collective]
    return min(outside or waiting, key=lambda r: (r.last_step, r.rank))


def hang_cause(ranks, now: float, hang_timeout_s: float):
    """The hang to end the run for (a Cause naming the rank that holds the others up), or None while every rank
    not done was heard from within its limit. Our own start (imports, the rendezvous) is not a hang until it takes
    far longer; the user's code (a model's build, a script's start) and every step are bounded by the timeout."""
    silent = [r for r in ranks if not r.done and now - r.last_heard > hang_limit(r, hang_timeout_s)]
    if not silent:
        return None
    culprit = hung_rank(ranks, now, hang_timeout_s)
    allowed = hang_limit(culprit, hang_timeout_s)
    return Cause("hang", culprit, Hang(allowed, culprit.phase,
                                       now - culprit.alive_at if culprit.alive_at is not None else None,
                                       silent_after(hang_timeout_s), start_up=allowed > hang_timeout_s))


@dataclass(frozen=True)
class Hang:
    """What the watchdog saw of the hung rank."""
    limit_s: float                  # the limit that ran out
    phase: str                      # engine/run/heartbeat.py
    mute_s: float | None            # seconds since its last heartbeat (None: it never sent one)
    mute_after_s: float             # a heartbeat missing this long means the process no longer answers
    start_up: bool = False          # the limit was the start-up allowance, not the hang timeout

    def describe(self, rank) -> str:
        which = "the start-up allowance" if self.start_up else "--hang-timeout"
        if rank.ready:
            doing = (f"in step {rank.last_step + 1} (last finished step: {rank.last_step})" if rank.last_step >= 0
                     else "in its first step")
        else:
            doing = f"while {self.phase}"
        if self.mute_s is not None and self.mute_s > self.mute_after_s:
            state = (f"; its heartbeat stopped {self.mute_s:.0f} s ago (the process is stopped, or stuck without "
                     "releasing Python's lock)")
        elif rank.where:
            state = f"; it was {'waiting' if rank.in_collective else 'last seen'} in {rank.where}"
        else:
            state = ""
        return (f"{rank.label} hung {doing}: no progress for {self.limit_s:g} s ({which}){state}; the run was ended "
                "by the watchdog")


def describe_exit(code: int) -> str:
    if code == 0:
        return "exited before finishing its steps"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


@dataclass(frozen=True)
class Cause:
    kind: str     # "node", "exit", "hang" or "error"
    rank: Any     # the worker's Rank; for "node" the node's link, or None for a launch that failed
    detail: Any   # node: what it said (str); exit: the status; hang: a Hang; error: rank_events.Failed

    @property
    def priority(self) -> int:
        return 0 if self.kind == "exit" and self.detail < 0 else _PRIORITY[self.kind]

    def error_fields(self) -> dict:
        """The worker's ``error`` event (docs/protocol.md) for this cause."""
        r, detail = self.rank, self.detail
        if self.kind == "node":
            # A node's own word is named by its link; a failed launch's (no link) names its node already.
            if r is None:
                message = detail
            elif detail.startswith("lost"):
                message = f"{r.describe()} {detail}"
            else:
                message = f"{r.describe()}: {detail}"
            return dict(message=message, rank=None, device=None, node=r.label if r is not None else None,
                        traceback=None)
        tb = None
        if self.kind == "exit":
            message = f"{r.label} {describe_exit(detail)}"
            if r.error:
                message += f" after: {r.error.message}"
                tb = r.error.traceback
            elif detail > 0 and r.stderr_tail:
                message += f"; last output: {r.stderr_tail[-1]}"
                tb = "\n".join(r.stderr_tail)
        elif self.kind == "hang":
            message = detail.describe(r)
        else:
            message = f"{r.label} failed: {detail.message}"
            tb = detail.traceback
        return dict(message=message, rank=r.rank, device=r.device.name, traceback=tb)


@dataclass
class Failure:
    causes: list[Cause]
    first_seen: float = field(default_factory=time.monotonic)

    def settled(self) -> bool:
        return time.monotonic() - self.first_seen >= CAUSE_SETTLE_S

    def root(self) -> Cause:
        return min(self.causes, key=lambda cause: cause.priority)


def noted(failure: Failure | None, cause: Cause) -> Failure:
    """``failure`` with ``cause`` added, or a new one from it."""
    if failure is None:
        return Failure([cause])
    failure.causes.append(cause)
    return failure
