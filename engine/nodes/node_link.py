"""One node as the coordinator holds it (``NodeLink``): its agent's connection, what the agent said of itself,
its clock offset (following the clocks' drift through the run's pings), its ranks, and what the run keeps of it.

Its own module because it is the coordinator's plain record of a node, apart from how the coordinator reaches
the nodes and drives their ranks (engine/nodes/coordinator.py: ``connect`` makes one, ``NodeRanks`` reads and
pings through them); the worker holds them too (engine/run/worker.py).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from engine.nodes import connection
from engine.nodes.address import NodeAddress, node_label
from engine.nodes.clock import ClockOffset, estimate
from engine.results import NodeSummary
from engine.wire import nodes as messages

CLOCK_TRIPS = 30         # the recent round trips the clock offset is taken from (the quickest of them)


@dataclass
class NodeLink:
    """One node: its agent's connection, what it said of itself, its clock, its ranks."""
    index: int
    address: NodeAddress
    channel: connection.Channel
    info: messages.Info
    clock: ClockOffset
    ranks: list[int] = field(default_factory=list)
    last_heard: float = field(default_factory=time.monotonic)
    ended: threading.Event = field(default_factory=threading.Event)
    lost: bool = False
    launch_reply: threading.Event = field(default_factory=threading.Event)
    reply: messages.Launched | messages.Failed | None = None  # the agent's answer to the launch
    delivering: bool = False   # handing what it sent to a worker loop that is behind: busy, not silent
    first_clock: ClockOffset | None = None
    trips: deque = field(default_factory=lambda: deque(maxlen=CLOCK_TRIPS))
    sent: dict = field(default_factory=dict)  # ping id -> when it was sent

    def __post_init__(self):
        self.first_clock = self.clock

    def answered(self, pong: messages.Pong) -> None:
        """A pong during the run: the offset follows the clocks' drift (the quickest recent round trip)."""
        t0 = self.sent.pop(pong.id, None)
        if t0 is not None:
            self.trips.append((t0, pong.time, time.perf_counter()))
            self.clock = estimate(list(self.trips))

    @property
    def label(self) -> str:
        return node_label(self.index)

    def describe(self) -> str:
        """"node1 (10.0.0.3:29400, ranks 2-3)": how errors name a node."""
        ranks = (f"rank {self.ranks[0]}" if len(self.ranks) == 1 else
                 f"ranks {self.ranks[0]}-{self.ranks[-1]}") if self.ranks else "no ranks yet"
        return f"{self.label} ({self.address}, {ranks})"

    def summary(self) -> NodeSummary:
        """What the run keeps of the node (RunSummary.nodes): the offset measured before the run, and how far
        it drifted by the end."""
        first = self.first_clock or self.clock
        return NodeSummary(label=self.label, address=str(self.address), hostname=self.info.hostname,
                           ranks=list(self.ranks), clock_offset_s=first.offset_s, clock_rtt_s=first.rtt_s,
                           clock_drift_s=self.clock.offset_s - first.offset_s)
