"""A connection to the fork server (``Connection``): the requests a process sends it and the reports it reads
back, with the errors that tell the caller to start its process fresh instead (``ForkServerError``,
``ForkServerRefused``).

Its own module because it is the one part of the fork server's client side that speaks the wire
(engine/wire/forkserver.py over engine/forkserver/datagrams.py); engine/forkserver/client.py builds on it:
the server's owner, the children it forks, and the choice between forking and starting fresh.
"""
from __future__ import annotations

import itertools
import os
import socket
import threading
import time

from engine.forkserver import datagrams
from engine.wire import forkserver as messages
from engine.wire.forkserver import Client, Exited, Pong, Refused, Signal, Spawn, Spawned

REPLY_TIMEOUT_S = 120.0    # the server answers once it has imported torch: seconds, on a busy machine more


class ForkServerError(ConnectionError):
    """The fork server is gone, did not answer, or refused the request: start the process fresh instead."""


class ForkServerRefused(ForkServerError):
    """The fork server answered no: nothing of the request is left with it."""


class Connection:
    """Requests to the fork server and its reports of the children they made; one reader thread."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._send_lock = threading.Lock()
        self._changed = threading.Condition()
        self._replies: dict[int, Spawned | Refused] = {}
        self._exits: dict[int, int] = {}
        self._closed = False
        self.serving = False   # the server answered a ping: its imports are done, a child comes in milliseconds
        self._ids = itertools.count()
        threading.Thread(target=self._read, name="forkserver-reader", daemon=True).start()

    @property
    def closed(self) -> bool:
        return self._closed

    def _read(self) -> None:
        try:
            self._read_until_closed()
        finally:   # whatever ended the reading, nobody waits on this connection any longer
            with self._changed:
                self._closed = True
                self._changed.notify_all()
            # Ours closed too: the server then ends whatever it forked for us, which we could no longer follow.
            self.close()

    def _read_until_closed(self) -> None:
        while True:
            try:
                got = datagrams.receive(self._sock)
            except datagrams.WireError:
                got = None
            if got is None:
                return
            data, fds = got
            for fd in fds or ():
                os.close(fd)
            try:
                message = messages.decode(data)
            except messages.MessageError:
                continue   # not what this server sends: nothing waits on it
            with self._changed:
                match message:
                    case Spawned(id=ident, pid=pid):
                        self._replies[ident] = message
                        # A pid the kernel gave again: the exit seen is an earlier child's ("spawned" comes first).
                        self._exits.pop(pid, None)
                    case Refused(id=ident):
                        self._replies[ident] = message
                    case Exited(pid=pid, code=code):
                        self._exits[pid] = code
                    case Pong():
                        self.serving = True
                self._changed.notify_all()

    def _send(self, message: messages.Message, fds: list[int] | tuple[int, ...] = ()) -> None:
        if self._closed:
            raise ForkServerError("the fork server is gone")
        with self._send_lock:
            try:
                datagrams.send(self._sock, messages.encode(message), fds)
            except datagrams.WireError as exc:
                raise ForkServerError(str(exc)) from exc

    def spawn(self, module: str, *, env: dict[str, str], cwd, fds: dict[int, int], argv=(), title: str = "",
              timeout: float = REPLY_TIMEOUT_S, cancel: threading.Event | None = None, imports=()) -> int:
        """A child running ``python -m module argv`` with ``fds`` (its number -> ours) open; its pid. ``title``:
        what ps shows after its command (``python -m module argv``). The server answers once its imports are
        done (seconds after it started); ``cancel`` set meanwhile stops the wait. A request that timed out or
        was cancelled may still be served: its caller closes this connection, and the server then ends what
        it forked (a shared connection's late child finds its pipes closed)."""
        ident = next(self._ids)
        numbers = sorted(fds)
        self._send(Spawn(ident, module, dict(env), str(cwd), numbers, [str(a) for a in argv], title, list(imports)),
                   [fds[n] for n in numbers])
        deadline = time.monotonic() + timeout
        with self._changed:
            while (ident not in self._replies and not self._closed and time.monotonic() < deadline
                   and not (cancel is not None and cancel.is_set())):
                self._changed.wait(max(0.0, min(0.1, deadline - time.monotonic())))
            reply = self._replies.pop(ident, None)
        if reply is None:
            raise ForkServerError("the fork server is gone" if self._closed else
                                  "cancelled" if cancel is not None and cancel.is_set() else
                                  f"the fork server did not answer in {timeout:g} s")
        if isinstance(reply, Refused):
            raise ForkServerRefused(f"the fork server refused: {reply.error}")
        return reply.pid

    def exit_code(self, pid: int, timeout: float | None = 0.0) -> int | None:
        """The child's exit status once it ended (Popen's returncode: -N for signal N), else None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while pid not in self._exits and not self._closed:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._changed.wait(left)
            # The server gone: its children had the parent-death signal, SIGKILL.
            return self._exits.get(pid, -9)

    def signal(self, pid: int, number: int) -> None:
        try:
            self._send(Signal(pid, int(number)))
        except ForkServerError:
            pass  # the server is gone, and its children with it

    def hand_over(self) -> socket.socket:
        """A new connection for another process (a worker): ours to pass on, the server's other end."""
        try:
            mine, theirs = datagrams.pair()
        except OSError as exc:  # out of descriptors: the worker starts its ranks fresh
            raise ForkServerError(f"no connection for the worker: {exc}") from exc
        try:
            self._send(Client(), [theirs.fileno()])
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        return mine

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
