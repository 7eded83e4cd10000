"""The connections a node agent has accepted but not yet authenticated: bounded, the oldest dropped first.

Before a peer proves the token it holds a socket and a thread of the agent's, and
anyone on the networks the agent serves can open one. A plain count of such
connections, refusing the ones over it (as the agent had), let eight peers that
connect and send nothing hold every place, and a real coordinator was refused for as
long as they kept reconnecting (issue 52). So:

- at most ``PER_PEER`` unauthenticated connections from one address, and ``TOTAL``
  in all;
- a connection over either limit is not refused: it pushes out the *oldest*
  unauthenticated one (of its own address when that address is over its limit, else
  of all). An idle connection is only ever pushed out by a newer one, and a
  coordinator proves the token within a round trip or two of connecting, so it is
  through long before the connections after it could push it out;
- each must prove the token within ``AUTH_DEADLINE_S`` of being accepted
  (``connection.handshake_agent`` cuts it then).

One address can therefore push out only its own connections until the total is
reached; a coordinator that shares its address with a flood (a NAT) is pushed out
only by ``PER_PEER`` new connections within its handshake's round trips.
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

PER_PEER = 4            # unauthenticated connections from one address, at most
TOTAL = 16              # unauthenticated connections in all, at most
AUTH_DEADLINE_S = 5.0   # from accept to proven: the handshake is 1.5 round trips, no work in between


@dataclass(eq=False)
class Pending:
    """One accepted connection, until it proved the token or gave up."""
    sock: socket.socket
    peer: str
    accepted: float = field(default_factory=time.monotonic)
    dropped: str | None = None   # why it was pushed out (for the agent's log), once it was


class Handshakes:
    """``admit`` every accepted connection (in the accepting thread, so that "oldest" is the order of arrival),
    ``settle`` it once its handshake ended either way."""

    def __init__(self, per_peer: int = PER_PEER, total: int = TOTAL):
        self.per_peer = per_peer
        self.total = total
        self._lock = threading.Lock()
        self._pending: list[Pending] = []   # oldest first

    def admit(self, sock: socket.socket, peer: str) -> Pending:
        """A place for the new connection, made by pushing out the oldest one where a limit is reached."""
        with self._lock:
            same = [p for p in self._pending if p.peer == peer]
            victim = None
            if len(same) >= self.per_peer:
                victim, why = same[0], f"newer connections from {peer} (at most {self.per_peer} from one address)"
            elif len(self._pending) >= self.total:
                victim, why = self._pending[0], f"newer connections (at most {self.total} in all)"
            if victim is not None:
                self._pending.remove(victim)
                victim.dropped = (f"not proven after {time.monotonic() - victim.accepted:.1f} s, pushed out by {why} "
                                  "waiting to prove the token")
                # Under the lock: its owner closes the socket only after ``settle`` (which takes the lock), so the
                # descriptor shut down here is still this connection's. Shutting down wakes its handshake's read.
                try:
                    victim.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            pending = Pending(sock, peer)
            self._pending.append(pending)
            return pending

    def settle(self, pending: Pending) -> bool:
        """Its handshake ended: its place is free. False when it had been pushed out meanwhile (then its socket is
        shut down, even if the handshake got through)."""
        with self._lock:
            if pending in self._pending:
                self._pending.remove(pending)
                return True
            return False

    def count(self, peer: str | None = None) -> int:
        with self._lock:
            return sum(1 for p in self._pending if peer is None or p.peer == peer)
