"""The fork server's messages: one JSON object a datagram (SOCK_SEQPACKET keeps them whole), with file
descriptors beside it (SCM_RIGHTS). Both ends are one machine's processes of one user, joined by socketpair:
no address anyone else could connect to."""
from __future__ import annotations

import json
import os
import socket

MAX_MESSAGE = 1 << 20  # a request carries a rank's environment: a few KB, its config included
MAX_FDS = 8


class WireError(ConnectionError):
    """The other end is gone, or sent what no fork server sends."""


def pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send(sock: socket.socket, message: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    try:
        if fds:
            socket.send_fds(sock, [data], list(fds))
        else:
            sock.send(data)
    except OSError as exc:
        raise WireError(f"fork server connection: {exc}") from exc


def receive(sock: socket.socket) -> tuple[dict, list[int]] | None:
    """The next message and the descriptors that came with it (the receiver's to close); None at the end."""
    try:
        data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS, socket.MSG_CMSG_CLOEXEC)
    except OSError as exc:
        raise WireError(f"fork server connection: {exc}") from exc
    if not data and not fds:
        return None
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise WireError("fork server message too long")
    try:
        message = json.loads(data)
    except ValueError as exc:
        for fd in fds:
            os.close(fd)
        raise WireError(f"fork server sent a garbled message: {exc}") from exc
    if not isinstance(message, dict):
        for fd in fds:
            os.close(fd)
        raise WireError("fork server sent a garbled message")
    return message, fds
