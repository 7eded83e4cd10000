"""The fork server's messages: one JSON object a datagram (SOCK_SEQPACKET keeps them whole), with file
descriptors beside it (SCM_RIGHTS). Both ends are one machine's processes of one user, joined by socketpair:
no address anyone else could connect to."""
from __future__ import annotations

import os
import socket

from engine.wire import codec

# A request carries a rank's whole environment: a few KB, its config included. What one datagram can hold
# is the socket's send buffer (about 200 KB by default); a larger request fails to send, and its process
# starts fresh.
MAX_MESSAGE = 256 * 1024
MAX_FDS = 8


class WireError(ConnectionError):
    """The other end is gone, or sent what no fork server sends."""


def pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send(sock: socket.socket, message: dict, fds: list[int] | tuple[int, ...] = (), *, wait: bool = True) -> None:
    """``wait=False``: WireError rather than waiting for a reader that stopped reading."""
    if len(fds) > MAX_FDS:
        raise WireError(f"fork server message with {len(fds)} descriptors: at most {MAX_FDS}")
    data = codec.dumps(message).encode()
    flags = 0 if wait else socket.MSG_DONTWAIT
    try:
        if fds:
            socket.send_fds(sock, [data], list(fds), flags)
        else:
            sock.send(data, flags)
    except OSError as exc:
        raise WireError(f"fork server connection: {exc}") from exc


def receive(sock: socket.socket) -> tuple[dict, list[int] | None] | None:
    """The next message and the descriptors that came with it (the receiver's to close), None for the
    descriptors when more came than MAX_FDS (the message is whole: it can be refused); None at the end."""
    try:
        data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS, socket.MSG_CMSG_CLOEXEC)
    except OSError as exc:
        raise WireError(f"fork server connection: {exc}") from exc
    if not data and not fds:
        return None
    if flags & socket.MSG_CTRUNC:
        for fd in fds:
            os.close(fd)
        fds = None
    try:
        if flags & socket.MSG_TRUNC:
            raise ValueError("longer than a message may be")
        message = codec.loads(data, "fork server")
        if not isinstance(message, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:   # codec.WireError is one
        for fd in fds or ():
            os.close(fd)
        raise WireError(f"fork server sent a garbled message: {exc}") from exc
    return message, fds
