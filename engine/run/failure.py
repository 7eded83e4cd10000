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

CAUSE_SETTLE_S = 0.5   # after a first failure, how long to look for its root cause among the ranks
_PRIORITY = {"node": -1, "exit": 3, "hang": 1, "error": 2}


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
    detail: Any   # node: what it said (str); exit: the status; hang: the limit in s; error: rank_events.Failed

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
            message = (f"{r.label} hung: no progress for {detail:g} s (last finished step: {r.last_step}); "
                       "the run was ended by the watchdog")
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
