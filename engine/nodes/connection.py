"""The agent's connection: JSON lines that, once both sides proved the token, carry a MAC each.

The handshake (no token ever crosses the network):

    agent -> {"type": "challenge", "nonce": A}
    coordinator -> {"type": "auth", "nonce": C, "proof": HMAC(token, "coordinator" | A | C)}
    agent -> {"type": "welcome", "proof": HMAC(token, "agent" | A | C)}   or {"type": "refused", "reason"}

Both proofs are checked with ``hmac.compare_digest``. After it every line is
``TAG JSON``, TAG = HMAC(session key, direction | sequence number | JSON) with the
session key HMAC(token, "session" | A | C): a line injected, replayed, reordered
or altered on the way ends the connection. The lines are not encrypted: the
config and a model file travel in the clear (docs/nodes.md says so).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import threading
import time

from engine.wire import codec
from engine.wire.nodes import HANDSHAKE, Auth, Challenge, Refused, Welcome

HANDSHAKE_TIMEOUT_S = 10.0   # the whole handshake, not each read
MAX_LINE = 64 * 1024 * 1024  # a model file travels in one line
MAX_PLAIN_LINE = 4096        # a handshake's line: nobody unproven makes us read more
TAG_HEX = 32                 # 16 bytes of HMAC-SHA256


class WireError(ConnectionError):
    """The other side is gone, refused us, or sent what it must not."""


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"|".join(parts), hashlib.sha256).digest()


class Channel:
    """A connected socket speaking JSON lines, MAC'd once ``handshake_*`` returned it."""

    def __init__(self, sock: socket.socket, *, side: str):
        self.sock = sock
        self.peer = sock.getpeername()[0] if sock.family in (socket.AF_INET, socket.AF_INET6) else "local"
        self._reader = sock.makefile("rb")
        self._send_lock = threading.Lock()
        self._key: bytes | None = None
        self._out_dir, self._in_dir = (b"c", b"a") if side == "coordinator" else (b"a", b"c")
        self._sent = 0
        self._received = 0

    # ---- plain lines (the handshake) ----------------------------------------------------------
    def send_plain(self, message) -> None:
        """A handshake's message (engine/wire/nodes.py HANDSHAKE)."""
        self._write(HANDSHAKE.line(message).encode())

    def receive_plain(self, deadline: float | None = None):
        """The next handshake message; None for one of a type this end does not know."""
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WireError("the handshake took too long")
            self.sock.settimeout(remaining)
        line = self._readline(MAX_PLAIN_LINE)
        try:
            return HANDSHAKE.read(line)
        except codec.WireError:
            raise WireError("the peer does not speak Splitscope's node protocol") from None

    # ---- MAC'd lines ------------------------------------------------------------------------------
    def send(self, message: dict) -> None:
        payload = codec.dumps(message).encode()
        with self._send_lock:
            tag = _mac(self._key, self._out_dir, self._sent.to_bytes(8, "big"), payload)[:TAG_HEX // 2]
            self._sent += 1
            self._write_locked(tag.hex().encode() + b" " + payload)

    def receive(self) -> dict:
        """The next message; WireError when the connection ends or a line's MAC is wrong."""
        line = self._readline()
        tag, _, payload = line.partition(b" ")
        expected = _mac(self._key, self._in_dir, self._received.to_bytes(8, "big"), payload)[:TAG_HEX // 2]
        if not hmac.compare_digest(tag, expected.hex().encode()):
            raise WireError("a message failed its authentication check (altered, replayed or injected)")
        self._received += 1
        try:
            message = codec.loads(payload, "node wire")
        except codec.WireError:
            raise WireError("a message that is not JSON") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise WireError("a message without a type")
        return message

    def close(self) -> None:
        # Shut down first: it wakes a thread blocked reading, which holds the reader's lock that close() needs.
        for close in (lambda: self.sock.shutdown(socket.SHUT_RDWR), self.sock.close, self._reader.close):
            try:
                close()
            except OSError:
                pass

    # ---- bytes --------------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        with self._send_lock:
            self._write_locked(data)

    def _write_locked(self, data: bytes) -> None:
        try:
            self.sock.sendall(data + b"\n")
        except OSError as exc:
            raise WireError(f"the connection is gone ({exc.strerror or exc})") from None

    def _readline(self, most: int = MAX_LINE) -> bytes:
        try:
            line = self._reader.readline(most + 1)
        except (OSError, ValueError) as exc:
            raise WireError(f"the connection is gone ({getattr(exc, 'strerror', None) or exc})") from None
        if not line:
            raise WireError("the connection closed")
        if len(line) > most:
            raise WireError("a line longer than the protocol allows")
        return line.rstrip(b"\n")


def handshake_agent(sock: socket.socket, token: bytes, timeout: float = HANDSHAKE_TIMEOUT_S) -> Channel:
    """The agent's side: challenge, check the coordinator's proof, prove ourselves. WireError if refused, or
    not done within ``timeout`` however slowly the bytes come (the socket is shut down then). The agent gives
    less than the coordinator waits (engine.nodes.handshakes.AUTH_DEADLINE_S): an unproven peer holds a slot."""
    def cut():
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    started = time.monotonic()
    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    try:
        return _handshake_agent(sock, token, timeout)
    except WireError:
        cut()   # the peer sees the end now, whoever still holds the socket's file
        if time.monotonic() - started >= timeout:   # the cut (or the socket's timeout) looks like a closed peer
            raise WireError(f"did not prove the token within {timeout:g} s") from None
        raise
    finally:
        timer.cancel()


def _handshake_agent(sock: socket.socket, token: bytes, timeout: float) -> Channel:
    deadline = time.monotonic() + timeout
    sock.settimeout(timeout)
    channel = Channel(sock, side="agent")
    nonce_a = secrets.token_bytes(32)
    channel.send_plain(Challenge(nonce_a.hex()))
    try:
        reply = channel.receive_plain(deadline)
        if not isinstance(reply, Auth):
            raise ValueError("not an auth")
        nonce_c, proof = bytes.fromhex(reply.nonce), bytes.fromhex(reply.proof)
    except (ValueError, TimeoutError):
        raise WireError("no valid answer to the challenge") from None
    if len(nonce_c) != 32 or not hmac.compare_digest(proof, _mac(token, b"coordinator", nonce_a, nonce_c)):
        channel.send_plain(Refused("the coordinator did not prove the shared token"))
        raise WireError("the coordinator did not prove the shared token")
    channel.send_plain(Welcome(_mac(token, b"agent", nonce_a, nonce_c).hex()))
    channel._key = _mac(token, b"session", nonce_a, nonce_c)
    sock.settimeout(None)
    return channel


def handshake_coordinator(sock: socket.socket, token: bytes) -> Channel:
    """The coordinator's side: answer the challenge and check the agent's proof. WireError if either fails."""
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
    sock.settimeout(HANDSHAKE_TIMEOUT_S)
    channel = Channel(sock, side="coordinator")
    try:
        challenge = channel.receive_plain(deadline)
        if isinstance(challenge, Refused):
            raise WireError(f"the agent refused the connection: {challenge.reason}")
        nonce_a = bytes.fromhex(challenge.nonce) if isinstance(challenge, Challenge) else b""
    except (ValueError, TimeoutError):
        raise WireError("the peer is not a Splitscope node agent (no challenge)") from None
    if len(nonce_a) != 32:
        raise WireError("the peer is not a Splitscope node agent (no challenge)")
    nonce_c = secrets.token_bytes(32)
    channel.send_plain(Auth(nonce_c.hex(), _mac(token, b"coordinator", nonce_a, nonce_c).hex()))
    try:
        answer = channel.receive_plain(deadline)
    except TimeoutError:
        raise WireError("the agent did not answer the proof") from None
    if isinstance(answer, Refused):
        raise WireError(f"the agent refused: {answer.reason}")
    try:
        proof = bytes.fromhex(answer.proof) if isinstance(answer, Welcome) else b""
    except ValueError:
        proof = b""
    if not isinstance(answer, Welcome) or not hmac.compare_digest(proof, _mac(token, b"agent", nonce_a, nonce_c)):
        raise WireError("the agent did not prove the shared token (a different token, or not our agent)")
    channel._key = _mac(token, b"session", nonce_a, nonce_c)
    sock.settimeout(None)
    return channel
