"""The node agent: ``python main.py node --listen ADDR:PORT --token-file F [--allow NETS] [--allow-scripts]``.

It listens on the one address it is given, accepts coordinators only from the
addresses it is told to serve (``--allow``; by default the subnet of its own
address), and only once they prove the shared token (engine.nodes.connection). It serves
one coordinator at a time: on ``launch`` it starts that node's ranks through
torchrun (engine.nodes.node_run), and relays their events, their output and the
node's telemetry. It only ever starts Splitscope's rank entry point, with the
config it is sent; a model file travels only when the run names one, and a
user's script (``main.py watch --nodes``) only to an agent started with
``--allow-scripts``: any other refuses it.

When the coordinator says ``stop``, closes the connection, or falls silent for
the run's limit (its machine died, the network went down), the agent ends the
run's every process, and waits for the next coordinator.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import queue
import socket
import sys
import threading
import time
from datetime import datetime
from importlib import metadata

from engine.cores import usable_cores
from engine.nodes import connection
from engine.nodes.address import NodeAddress, allowed, interface_of, node_label
from engine.nodes.handshakes import AUTH_DEADLINE_S, Handshakes, Pending
from engine.nodes.janitor import WorkFolder
from engine.nodes.node_run import NodeRun, bind_rendezvous, launch_strategy
from engine.wire import nodes as messages

# 2: the samples' rows carry wait_util; 3: energy_j and GPM's four (DeviceSample's fields, in order); 4: a watched
# script travels in the launch, and the info says whether the agent runs one
PROTOCOL = 4
IDLE_SILENCE_S = 60.0   # a connected coordinator that says nothing before launching is dropped after this
PING_EVERY_S = 1.0      # the coordinator pings this often during a run; the agent answers (engine.nodes.coordinator)


def log(message: str) -> None:
    print(f"{datetime.now():%H:%M:%S} {message}", file=sys.stderr, flush=True)


def node_info(host: str, interface: str, runs_scripts: bool = False) -> messages.Info:
    """What a coordinator needs to know of this node before it launches: its devices and its versions."""
    from engine.devices import gpu_count
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    return messages.Info(protocol=PROTOCOL, hostname=socket.gethostname(), address=host, interface=interface,
                         cores=usable_cores(), gpus=gpu_count(), torch=torch_version, python=sys.version.split()[0],
                         pid=os.getpid(), time=time.perf_counter(), runs_scripts=runs_scripts)


class NodeAgent:
    def __init__(self, listen: NodeAddress, token: bytes, allow: list | None = None, allow_scripts: bool = False):
        self.listen = listen
        self.token = token
        self.allow_scripts = allow_scripts   # whether a watched script sent to it is run (else refused)
        interface = interface_of(listen.host)
        if interface is None:
            raise ValueError(f"--listen: no interface of this machine has the address {listen.host}")
        self.interface = interface
        if allow is None:
            from engine.nodes.address import network_of
            allow = [network_of(listen.host) or ipaddress.ip_network(listen.host)]
        self.allow = allow
        self._busy = threading.Lock()
        self._handshakes = Handshakes()   # connections not yet authenticated: bounded, the oldest pushed out
        self.workdir: WorkFolder | None = None   # the runs' folders go in it (serve() makes it)
        self._stop = threading.Event()
        self._server: socket.socket | None = None
        self._session: CoordinatorSession | None = None
        self._threads: list[threading.Thread] = []

    def bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.listen.host else socket.AF_INET
        self._server = socket.create_server((self.listen.host, self.listen.port), family=family, backlog=16)
        return self._server

    def serve(self) -> None:
        """Accept coordinators until ``shutdown()``."""
        server = self._server or self.bind()
        self.workdir = self.workdir or WorkFolder()
        try:
            log(f"node agent listening on {self.listen} (interface {self.interface}); coordinators from "
                f"{', '.join(map(str, self.allow))}; "
                + ("runs watched scripts (--allow-scripts)" if self.allow_scripts else "runs no scripts")
                + f"; working folder {self.workdir.path}")
            self._accept(server)
        finally:
            self.workdir.close()

    def _accept(self, server: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = server.accept()
            except OSError:
                break
            # Admitted here, in the order of arrival, not in its thread: "the oldest" is the first accepted.
            pending = self._handshakes.admit(conn, peer[0]) if allowed(peer[0], self.allow) else None
            thread = threading.Thread(target=self._serve, args=(conn, peer[0], pending), name="node-coordinator",
                                      daemon=True)
            thread.start()
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        for thread in self._threads:  # a run going on ends with its session (shutdown closed it)
            thread.join(timeout=30)

    def shutdown(self) -> None:
        """Stop accepting, end the run going on (if any); ``serve`` returns once it ended."""
        self._stop.set()
        session = self._session
        if session is not None:
            session.channel.close()
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()

    def _serve(self, conn: socket.socket, peer: str, pending: Pending | None) -> None:
        with conn:
            if pending is None:
                log(f"refused a connection from {peer}: not an address this agent serves (--allow)")
                refuse(conn, f"{peer} is not an address this agent serves (its --allow)")
                return
            channel = why = None
            try:
                channel = connection.handshake_agent(conn, self.token, timeout=AUTH_DEADLINE_S)
            except (connection.WireError, OSError) as exc:
                why = str(exc)
            # Settled before the socket is closed (``with conn``): Handshakes shuts down only open ones. Pushed
            # out meanwhile, its socket is shut down even if the handshake got through.
            if not self._handshakes.settle(pending) or channel is None:
                log(f"refused a connection from {peer}: {pending.dropped or why}")
                if channel is not None:
                    channel.close()
                return
            if not self._busy.acquire(blocking=False):
                log(f"refused {peer}: busy with another coordinator")
                try:
                    messages.send(channel, messages.Busy("the agent is serving another coordinator"))
                except connection.WireError:
                    pass
                channel.close()
                return
            try:
                log(f"coordinator {peer} connected")
                self._session = CoordinatorSession(self, channel, peer)
                self._session.run()
            finally:
                self._session = None
                self._busy.release()  # before the close: a coordinator that said bye may connect again at once
                channel.close()
                log(f"coordinator {peer} gone; waiting for the next")


def refuse(conn: socket.socket, reason: str) -> None:
    try:
        conn.sendall(messages.HANDSHAKE.line(messages.Refused(reason)).encode() + b"\n")
    except OSError:
        pass


class CoordinatorSession:
    """One connected coordinator: its messages, at most one run at a time, and a watch on its silence."""

    def __init__(self, agent: NodeAgent, channel: connection.Channel, peer: str):
        self.agent = agent
        self.channel = channel
        self.peer = peer
        self.node_run: NodeRun | None = None
        self.silence_s = IDLE_SILENCE_S
        self.last_heard = time.monotonic()
        self._ended = threading.Event()
        # Pongs go out from a thread of their own: the reading loop must go on reading (the coordinator's
        # pings are how it knows the coordinator lives) while a relay's send waits on a slow connection.
        self._pongs: queue.Queue = queue.Queue(maxsize=64)

    def run(self) -> None:
        messages.send(self.channel, node_info(self.agent.listen.host, self.agent.interface, self.agent.allow_scripts))
        threading.Thread(target=self._watch, name="node-coordinator-watch", daemon=True).start()
        threading.Thread(target=self._answer_pings, name="node-pong", daemon=True).start()
        try:
            while True:
                message = messages.receive(self.channel)
                self.last_heard = time.monotonic()
                if not self._handle(message):
                    break
        except (connection.WireError, ValueError) as exc:
            log(f"coordinator {self.peer}: {exc}")
        finally:
            self._ended.set()
            self._end_run("the coordinator is gone")

    def _handle(self, message: messages.Message | None) -> bool:
        match message:
            case messages.Ping():
                try:
                    self._pongs.put_nowait((message.id, time.perf_counter()))
                except queue.Full:
                    pass  # the connection is backed up: the coordinator sees us by what we send anyway
            case messages.Launch():
                self._launch(message)
            case messages.Stop():
                self._end_run("the coordinator stopped the run")
            case messages.Bye():
                return False
        return True

    def _answer_pings(self) -> None:
        while not self._ended.is_set():
            try:
                ping, at = self._pongs.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                messages.send(self.channel, messages.Pong(ping, at))
            except connection.WireError:
                return

    def _launch(self, message: messages.Launch) -> None:
        if self.node_run is not None:
            messages.send(self.channel, messages.Failed("a run is already going on this node"))
            return
        rendezvous = None
        try:
            is_script = message.script is not None or not launch_strategy(message).builds_model
            if is_script and not self.agent.allow_scripts:
                log(f"refused run {message.run_id}: it is a script, and this agent was not started with "
                    "--allow-scripts")
                messages.send(self.channel, messages.Failed("this agent runs no scripts (start it with "
                                                            "--allow-scripts to run watched scripts)"))
                return
            if is_script and message.script is None:
                messages.send(self.channel, messages.Failed("a watched script's run came without its script"))
                return
            self._check_devices(message)  # a DeviceError is a ValueError
            if message.rendezvous is None:  # this node hosts the rendezvous store
                rendezvous = bind_rendezvous(self.agent.listen.host)
                port = rendezvous.getsockname()[1]
                host = self.agent.listen.host
                message = dataclasses.replace(message, rendezvous=f"[{host}]:{port}" if ":" in host
                                              else f"{host}:{port}")
            self.silence_s = message.silence_s or IDLE_SILENCE_S
            self.node_run = NodeRun(message, host=self.agent.listen.host, interface=self.agent.interface,
                                    send=lambda m: messages.send(self.channel, m), rendezvous=rendezvous,
                                    parent_dir=self.agent.workdir.path if self.agent.workdir else None)
            pid = self.node_run.start()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if self.node_run is not None:
                self.node_run.stop()
                self.node_run = None
            elif rendezvous is not None:
                rendezvous.close()
            messages.send(self.channel, messages.Failed(f"could not start the run: {exc}"))
            return
        log(f"run {message.run_id}: torchrun (pid {pid}) started {message.nproc} rank(s) as node "
            f"{message.node_rank} of {message.nnodes}")
        messages.send(self.channel, messages.Launched(pid, message.rendezvous))

    def _check_devices(self, message: messages.Launch) -> None:
        """DeviceError when this node lacks the devices the run asks of it (the coordinator checked them against
        our info; checked again here, as the coordinator parsed them)."""
        from engine.nodes.cluster import node_devices
        node_devices(node_label(message.node_rank), message.config["devices"],
                     node_info(self.agent.listen.host, self.agent.interface))

    def _end_run(self, why: str) -> None:
        """End the run (if any) and say so: a stop is answered with ``ended`` whether or not a run was going."""
        run, self.node_run = self.node_run, None
        remaining = run.stop() if run is not None else []
        if run is not None:
            log(f"run {run.launch.run_id} ended: {why}" +
                (f"; ranks still alive: {remaining}" if remaining else ""))
        if not self._ended.is_set():
            try:
                messages.send(self.channel, messages.Ended(remaining))
            except connection.WireError:
                pass

    def _watch(self) -> None:
        """A coordinator silent longer than the run's limit is gone (its machine or the network died)."""
        while not self._ended.wait(0.5):
            silent = time.monotonic() - self.last_heard
            if silent > self.silence_s:
                log(f"coordinator {self.peer} silent for {silent:.0f} s: ending its run")
                self.channel.close()  # the reading loop ends, and with it the run
                return
