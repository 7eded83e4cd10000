"""The coordinator's side of the node agents: the worker's ranks on other machines.

``NodeRanks`` connects to every node's agent (engine.nodes.agent), proves the
token, measures each node's clock offset (engine.nodes.clock), asks the
rendezvous node to host the c10d store, launches every node's ranks, and turns
what the agents send into what the worker's loop already reads from local ranks:
rank events (on the coordinator's clock), stdout lines, the end of a rank's
events, exit codes; plus the nodes' telemetry and a node's loss, which ends the
run naming the node and its ranks. ``preflight`` asks the nodes the same
questions before anything launches (the command line's bad-input check).
"""
from __future__ import annotations

import base64
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable

from engine.nodes import connection
from engine.nodes.address import NodeAddress, node_label, parse_nodes
from engine.nodes.agent import PING_EVERY_S, PROTOCOL
from engine.nodes.clock import PINGS, estimate, shift_rank_event
from engine.nodes.node_link import NodeLink
from engine.nodes.token import TokenError, token_for
from engine.problems import Problem
from engine.wire import nodes as messages

CONNECT_TIMEOUT_S = 10.0
NODE_SILENCE_S = 10.0    # a node silent this long (its pings unanswered) is lost (or half the hang timeout if less)
STOP_WAIT_S = 2.5        # how long agents get to say their ranks ended: the worker ends within 3 s of a stop


class NodeError(ConnectionError):
    """A node could not be reached, refused us, or cannot run what is asked (a ConnectionError: the worker ends
    a run on one as on a lost connection, engine/run/worker.py)."""


def silence_limit(hang_timeout_s: float) -> float:
    """Seconds of silence after which either side gives the other up (engine.nodes.agent watches the same):
    half the hang timeout, so a lost node ends the run within it, but at most 10 s and at least 3 pings."""
    return max(3 * PING_EVERY_S, min(NODE_SILENCE_S, hang_timeout_s / 2))


def _first_word(channel: connection.Channel, label: str) -> messages.Message | None:
    """The agent's first message: its info, or that it is busy. An agent of another protocol version is named
    by its version before its fields are read (they may be others)."""
    data = channel.receive()
    if data["type"] == "info" and data.get("protocol") != PROTOCOL:
        raise NodeError(f"{label}: the agent speaks protocol {data.get('protocol')!r}, this coordinator "
                        f"{PROTOCOL}: run the same Splitscope on every machine")
    return messages.decode(data)


def connect(address: NodeAddress, token: bytes, index: int) -> NodeLink:
    """Connect, prove the token, read the node's info, measure its clock. NodeError saying why not."""
    label = f"{node_label(index)} ({address})"
    try:
        sock = socket.create_connection((address.host, address.port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise NodeError(f"{label}: cannot connect: {exc.strerror or exc}; is `python main.py node --listen "
                        f"{address}` running there?") from None
    try:
        channel = connection.handshake_coordinator(sock, token)
        sock.settimeout(CONNECT_TIMEOUT_S)
        info = _first_word(channel, label)
        if isinstance(info, messages.Busy):
            raise NodeError(f"{label}: {info.message}")
        if not isinstance(info, messages.Info):
            said = type(info).__name__ if info is not None else "a message of a type this coordinator does not know"
            raise NodeError(f"{label}: the agent began with {said}, not its info")
        trips = []
        for k in range(PINGS):
            t0 = time.perf_counter()
            messages.send(channel, messages.Ping(k))
            pong = messages.receive(channel)
            t1 = time.perf_counter()
            if not isinstance(pong, messages.Pong):
                raise NodeError(f"{label}: answered a ping with {type(pong).__name__}")
            trips.append((t0, pong.time, t1))
        sock.settimeout(None)
    except NodeError:   # before OSError, which it is
        sock.close()
        raise
    except (connection.WireError, OSError, KeyError, ValueError) as exc:
        sock.close()
        raise NodeError(f"{label}: {exc}") from None
    link = NodeLink(index, address, channel, info, estimate(trips))
    link.trips.extend(trips)
    return link


def script_problem(config, links: list[NodeLink]) -> str | None:
    """A watched script goes only to agents started with --allow-scripts: every other one, named."""
    refusing = [f"{link.label} ({link.address})" for link in links if not link.info.runs_scripts]
    if not config.script or not refusing:
        return None
    return (f"{', '.join(refusing)}: {'its agent runs' if len(refusing) == 1 else 'their agents run'} no scripts "
            "(start it with `main.py node --allow-scripts` to watch a script there)")


def source_file(path: str | None) -> messages.SourceFile | None:
    """A file the user named, to travel with the launch: its name and text (None where none is named);
    NodeError when it cannot be read as text."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return messages.SourceFile(os.path.basename(path), f.read())
    except (OSError, UnicodeError) as exc:
        raise NodeError(f"{path} cannot travel to the nodes: {exc}") from None


def version_problem(links: list[NodeLink]) -> str | None:
    from importlib import metadata
    try:
        ours = metadata.version("torch")
    except metadata.PackageNotFoundError:
        ours = None
    differ = [f"{link.label} has torch {link.info.torch}" for link in links if link.info.torch != ours]
    return f"torch differs between machines (here {ours}; {', '.join(differ)})" if differ else None


def connect_all(config) -> list[NodeLink]:
    """Every node of the config, connected, in rank order; NodeError naming the first that failed."""
    try:
        token = token_for(config.token_file)
    except TokenError as exc:
        raise NodeError(str(exc)) from None
    links: list[NodeLink] = []
    try:
        for k, address in enumerate(parse_nodes(config.nodes)):
            links.append(connect(address, token, k))
        problem = version_problem(links) or script_problem(config, links)
        if problem:
            raise NodeError(problem)
    except BaseException:
        for link in links:
            link.channel.close()
        raise
    return links


def preflight(config) -> list[Problem]:
    """Before launching: can every node be reached and authenticated, and does each have the devices asked?"""
    from engine.devices import DeviceError
    from engine.nodes.cluster import node_devices
    try:
        links = connect_all(config)
    except NodeError as exc:
        return [Problem("nodes", str(exc))]
    found = []
    for link in links:
        try:
            node_devices(link.label, config.devices, link.info)
        except DeviceError as exc:
            found.append(Problem("devices", str(exc)))
        say_bye(link)
    return found


def say_bye(link: NodeLink) -> None:
    """End the connection and wait for the agent to close it: then it is free for the next coordinator."""
    try:
        messages.send(link.channel, messages.Bye())
        link.channel.sock.settimeout(CONNECT_TIMEOUT_S)
        while True:
            link.channel.receive()
    except (connection.WireError, OSError, ValueError):
        pass
    link.channel.close()


class RemoteProcess:
    """A rank on another machine, as the worker's loop asks a local Popen: its pid, and its exit code once the
    node's torchrun said it (or the node was lost)."""

    def __init__(self):
        self.pid: int | None = None
        self._code: int | None = None
        self._exited = threading.Event()

    def exited(self, code: int) -> None:
        if not self._exited.is_set():
            self._code = code
            self._exited.set()

    def poll(self) -> int | None:
        return self._code

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            import subprocess
            raise subprocess.TimeoutExpired("remote rank", timeout)
        return self._code

    def terminate(self) -> None:
        pass  # ranks on a node end together, when its agent is told to stop (NodeRanks.stop)

    kill = terminate


class NodeRanks:
    """The worker's ranks on several nodes. ``put(kind, key, payload)`` hands what a node sent to the worker's
    loop (a rank's index for rank events, the NodeLink for a node's); it may wait while the loop is behind."""

    def __init__(self, config, links: list[NodeLink], devices, *, telemetry_hz: float, run_id: str,
                 put: Callable[[str, object, object], None]):
        self.config = config
        self.links = links
        self.devices = devices
        self.telemetry_hz = telemetry_hz
        self.run_id = run_id
        self.put = put
        self.nproc = len(devices) // len(links)
        self.processes = [RemoteProcess() for _ in devices]
        self.sources: tuple[messages.SourceFile | None, ...] = (None, None)   # launch() reads them
        self._profiles: dict[int, list[bytes]] = {}  # a rank's trace as its chunks arrive
        for link in links:
            link.ranks = list(range(link.index * self.nproc, (link.index + 1) * self.nproc))

    # ---- launching -------------------------------------------------------------------------------------
    def launch(self) -> None:
        """Start every node's ranks, the rendezvous node first (it hosts the store the others join)."""
        for link in self.links:
            threading.Thread(target=self._read, args=(link,), name=f"node{link.index}-reader", daemon=True).start()
        threading.Thread(target=self._ping, name="node-pinger", daemon=True).start()
        # the files that travel because the user named them (a model file, a watched script): read once, every
        # node gets the same text
        self.sources = tuple(source_file(path) for path in (self.config.model_file, self.config.script))
        rendezvous = None
        for link in self.links:
            reply = self._launch_one(link, rendezvous)
            rendezvous = rendezvous or reply.rendezvous

    def _launch_one(self, link: NodeLink, rendezvous: str | None) -> messages.Launched:
        config = self.config.replace(token_file=None, nodes=None).to_dict()
        model, script = self.sources
        try:
            messages.send(link.channel, messages.Launch(
                run_id=self.run_id, config=config, model_file=model, script=script,
                devices=[d.to_dict() for d in self.devices],
                node_rank=link.index, nnodes=len(self.links), nproc=self.nproc, rendezvous=rendezvous,
                telemetry_hz=self.telemetry_hz, silence_s=silence_limit(self.config.hang_timeout_s)))
        except connection.WireError as exc:
            raise NodeError(f"{link.describe()}: {exc}") from None
        if not link.launch_reply.wait(CONNECT_TIMEOUT_S * 3) or link.reply is None:
            raise NodeError(f"{link.describe()}: no answer to the launch")
        if isinstance(link.reply, messages.Failed):
            raise NodeError(f"{link.describe()}: {link.reply.message}")
        return link.reply

    # ---- what the agents send ----------------------------------------------------------------------------
    def _read(self, link: NodeLink) -> None:
        try:
            while True:
                message = messages.receive(link.channel)
                link.last_heard = time.monotonic()
                self._on_message(link, message)
        except Exception as exc:  # noqa: BLE001 (a node we cannot read, for whatever reason, is a node lost)
            if not link.ended.is_set():
                why = str(exc) if isinstance(exc, connection.WireError) else f"{type(exc).__name__}: {exc}"
                self._lose(link, f"the connection to its agent ended ({why})")

    def _deliver(self, link: NodeLink, kind: str, key, payload) -> None:
        """To the worker's loop, which may be behind (its queue full): the node is not silent meanwhile."""
        link.delivering = True
        try:
            self.put(kind, key, payload)
        finally:
            link.delivering = False
            link.last_heard = time.monotonic()

    def _on_message(self, link: NodeLink, m: messages.Message | None) -> None:
        if isinstance(m, (messages.Launched, messages.Failed)) and not link.launch_reply.is_set():
            link.reply = m
            link.launch_reply.set()
            return
        match m:
            case messages.Pong():
                link.answered(m)
            case messages.Ended():
                link.ended.set()
            case messages.Failed():
                self._deliver(link, "node_error", link, m.message)
            case messages.RankHello():
                self.processes[m.rank].pid = m.pid
            case messages.RankEvent():
                self._deliver(link, "event", m.rank, shift_rank_event(m.event, link.clock))
            case messages.RankProfileChunk():
                self._profiles.setdefault(m.rank, []).append(base64.b64decode(m.data))
            case messages.RankProfile():
                event = self._profile_here(m.rank, m.event)
                self._deliver(link, "event", m.rank, shift_rank_event(event, link.clock))
            case messages.RankOutput():
                self._deliver(link, m.stream, m.rank, m.line)
            case messages.RankClosed():
                self._deliver(link, "eof", m.rank, None)
            case messages.Samples():
                self._deliver(link, "samples", link, [[link.clock.to_coordinator(row[0]), *row[1:]] for row in m.rows])
            case messages.Warned():
                self._deliver(link, "warning", link, f"{link.label}: {m.message}")
            case messages.TorchrunExit():
                self._torchrun_ended(link, m)

    def _torchrun_ended(self, link: NodeLink, m: messages.TorchrunExit) -> None:
        failures = {int(rank): int(code) for rank, code in m.failures.items()}
        for rank in link.ranks:  # torchrun names the ranks that failed; the others ended with it
            self.processes[rank].exited(failures.get(rank, 0 if m.code == 0 else 1))
        if m.code != 0 and not failures and not m.stopping:
            tail = "\n".join(m.output)
            self._deliver(link, "node_error", link, f"torchrun failed: {m.error}" + (f"\n{tail}" if tail else ""))

    def _profile_here(self, rank: int, event: dict) -> dict:
        """A rank's profiler trace, from its chunks into a file where this machine's session picks it up (and
        removes it: engine.run.session)."""
        event = dict(event)
        chunks = self._profiles.pop(rank, None)
        if not chunks:
            event["path"] = ""  # too large to travel: the session says it could not store it
            return event
        fd, path = tempfile.mkstemp(prefix=f"splitscope-rank{rank}-", suffix=".json")
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        event["path"] = path
        return event

    def _lose(self, link: NodeLink, why: str) -> None:
        if link.lost:
            return
        link.lost = True
        for rank in link.ranks:
            self.processes[rank].exited(-9)
        link.launch_reply.set()  # a launch waiting on it: no answer will come
        link.channel.close()     # wakes a send blocked on the dead connection
        self._deliver(link, "node_lost", link, why)

    def _ping(self) -> None:
        """A ping a second to each node; a node that answers nothing (and sends nothing) for the limit is lost.
        Its answers also keep its clock offset current (NodeLink.answered)."""
        limit = silence_limit(self.config.hang_timeout_s)
        k = 0
        while not all(link.ended.is_set() or link.lost for link in self.links):
            for link in self.links:
                if link.lost or link.ended.is_set():
                    continue
                try:
                    link.sent[k] = time.perf_counter()
                    messages.send(link.channel, messages.Ping(k))
                except connection.WireError:
                    pass  # the reader says how the connection ended
                silent = time.monotonic() - link.last_heard
                if silent > limit and not link.delivering:
                    self._lose(link, f"silent for {silent:.0f} s (its machine stopped, or the network to it is "
                                     "down)")
            k += 1
            time.sleep(PING_EVERY_S)

    # ---- ending ---------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Every agent ends its ranks and says so (or is given up after STOP_WAIT_S: closing the connection ends
        them too); connections closed. The worker's loop no longer takes their events (``put`` drops them)."""
        for link in self.links:
            if not link.lost:
                try:
                    messages.send(link.channel, messages.Stop())
                except connection.WireError:
                    pass
        deadline = time.monotonic() + STOP_WAIT_S
        for link in self.links:
            if not link.lost:
                link.ended.wait(max(0.0, deadline - time.monotonic()))
            link.ended.set()
            link.channel.close()
        for process in self.processes:
            process.exited(process.poll() if process.poll() is not None else -15)


def connect_run_nodes(config):
    """The run's nodes, connected and authenticated (``connect_all``), and their devices; raises
    ConnectionError (a NodeError) or DeviceError naming the node that cannot be used."""
    from engine.devices import DeviceError
    from engine.nodes.cluster import cluster_devices
    links = connect_all(config)
    try:
        return links, cluster_devices(config.devices, [link.address for link in links], [link.info for link in links])
    except DeviceError:
        for link in links:
            link.channel.close()
        raise
