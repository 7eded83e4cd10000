"""One run's ranks on one node, as its agent keeps them: torchrun, the ranks' streams, the node's telemetry.

The ranks are started by torchrun (``engine.nodes.torchrun``), so they are not the
agent's children and cannot inherit a pipe from it: each rank connects to a Unix
socket in the run's private folder (SPLITSCOPE_EVENT_SOCKET), three times, for its
events, its stdout and its stderr (engine.run.rank), each connection opened by a line
saying which rank and stream it is. Everything is handed to ``send`` as messages
for the coordinator (docs/nodes.md):

    rank_hello {rank, local_rank, pid}     rank_event {rank, event}     rank_closed {rank}
    rank_output {rank, stream, line}        rank_profile {rank, event, data}
    samples {rows}                          torchrun_exit {code, failures, error, output}

Times stay on this machine's clock: the coordinator puts them on its own.
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable

import psutil

from engine.devices import Device
from engine.environment import ROOT, rank_base_environment
from engine.wire import codec, nodes as messages, rank as rank_events

KILL_GRACE_S = 1.0        # torchrun's SIGTERM to its workers, then SIGKILL (and ours to torchrun)
HELLO_TIMEOUT_S = 30.0    # a connection to the ranks' socket that names no rank is dropped
OUTPUT_TAIL = 40          # torchrun's own last lines, for the error when it fails
RENDEZVOUS_JOIN_S = 180   # how long torchrun waits for every node (the worker's start-up limit)
MAX_PROFILE_BYTES = 256 * 1024 * 1024
PROFILE_CHUNK = 512 * 1024  # a trace travels in pieces: pongs and events go between them


def bind_rendezvous(host: str) -> socket.socket:
    """A listening socket on ``host`` alone, on a free port: the c10d store's (engine.nodes.torchrun)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(128)
    return sock


def launch_strategy(launch: messages.Launch):
    """The strategy the launch's config names (engine.strategies); KeyError naming it where none is known."""
    from engine.strategies import STRATEGIES
    name = launch.config["strategy"]
    if not isinstance(name, str) or name not in STRATEGIES:
        raise KeyError(f"no strategy {name!r}")
    return STRATEGIES[name]


class NodeRun:
    """Start with ``start()``; ``stop()`` ends every process of it and removes its folder (idempotent)."""

    def __init__(self, launch: messages.Launch, *, host: str, interface: str, send: Callable[[messages.Message], None],
                 rendezvous: socket.socket | None = None, parent_dir: str | None = None):
        self.launch = launch
        self.host = host
        self.interface = interface
        self.send = send
        self.rendezvous = rendezvous
        self.devices = [Device(**d) for d in launch.devices]
        first = launch.node_rank * launch.nproc
        self.local_devices = self.devices[first:first + launch.nproc]
        # what each rank runs: the strategy's entry point (a watched script's bootstrap, else engine.run.rank)
        strategy = launch_strategy(launch)
        self.rank_module = strategy.rank_module
        self.ranks_lead_groups = not strategy.builds_model   # a watched script's rank leads its own processes' group
        # 0700: the ranks' socket is ours alone. In the agent's working folder (``parent_dir``), which its watcher
        # removes even when the agent is SIGKILLed (engine.nodes.janitor).
        # A short name there: the socket's path must fit a sockaddr_un (108 bytes).
        self.dir = tempfile.mkdtemp(prefix="run-" if parent_dir else "splitscope-node-", dir=parent_dir)
        self.socket_path = os.path.join(self.dir, "ranks.sock")
        self.proc: subprocess.Popen | None = None
        self.rank_pids: dict[int, int] = {}
        self.output_tail: list[str] = []
        self._server: socket.socket | None = None
        self._sampler = None
        self._stopping = threading.Event()
        self._stopped = False
        self._status_read: int | None = None
        self._lock = threading.Lock()

    # ---- start -------------------------------------------------------------------------------------
    def start(self) -> int:
        """Start torchrun; returns its pid."""
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.socket_path)
        self._server.listen(64)
        threading.Thread(target=self._accept, name="node-ranks-accept", daemon=True).start()
        self._start_telemetry()
        launch = self.launch
        # no path of this machine's is taken from afar: a file the user named travels, and is written here
        config = dict(launch.config, model_file=None, script=None, script_cwd=None)
        if launch.model_file is not None:
            config["model_file"] = self._write(launch.model_file, "model.py")
        if launch.script is not None:   # the agent runs one only with --allow-scripts (engine.nodes.agent)
            config["script"] = self._write(launch.script, "script.py")
            # it runs in that folder: the one the watch was started in here does not exist there
            config["script_cwd"] = os.path.dirname(config["script"])
        env = rank_base_environment(os.environ, config_json=codec.dumps(config, sort_keys=True),
                                    devices_json=codec.dumps(launch.devices), interface=self.interface)
        env.update(SPLITSCOPE_EVENT_SOCKET=self.socket_path, SPLITSCOPE_STORE_ADDR=launch.rendezvous,
                   SPLITSCOPE_STORE_PREFIX=f"splitscope/{launch.run_id}",
                   SPLITSCOPE_NODE_RANK=str(launch.node_rank), SPLITSCOPE_AGENT_PID=str(os.getpid()),
                   # No second store: torch's would listen on every interface (engine.nodes.torchrun).
                   TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
        status_read, status_write = os.pipe()
        store_fd = self.rendezvous.fileno() if self.rendezvous is not None else -1
        args = ["--nnodes", str(launch.nnodes), "--nproc-per-node", str(launch.nproc),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", launch.rendezvous,
                "--rdzv-id", launch.run_id,
                # Nobody hosts by guessing from hostnames: the store is engine.nodes.torchrun's.
                "--rdzv-conf", f"is_host=0,join_timeout={RENDEZVOUS_JOIN_S}",
                "--local-addr", self.host, "--max-restarts", "0", "--monitor-interval", "0.1",
                "--shutdown-timeout", str(int(KILL_GRACE_S)), "--log-dir", os.path.join(self.dir, "torchrun"),
                "-m", self.rank_module]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine.nodes.torchrun", str(status_write), str(store_fd), "--", *args],
            cwd=ROOT, env=env, pass_fds=tuple(fd for fd in (status_write, store_fd) if fd != -1),
            # The ranks inherit this stdin: when the agent closes it, or dies, they end (engine.run.rank).
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        os.close(status_write)
        if self.rendezvous is not None:
            self.rendezvous.close()  # torchrun's wrapper holds it now
        self._status_read = status_read
        threading.Thread(target=self._read_output, name="node-torchrun-output", daemon=True).start()
        threading.Thread(target=self._wait_torchrun, name="node-torchrun-wait", daemon=True).start()
        return self.proc.pid

    def _write(self, source: messages.SourceFile, default_name: str) -> str:
        """A file that travelled with the launch, in a folder of its own in the run's: its path."""
        folder = tempfile.mkdtemp(dir=self.dir, prefix="files-")
        path = os.path.join(folder, os.path.basename(source.name) or default_name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source.text)
        return path

    def _start_telemetry(self) -> None:
        hz = self.launch.telemetry_hz
        if not hz:
            return
        from engine.telemetry import TelemetrySampler, targets_for
        from engine.telemetry.sample import FIELD_NAMES

        def publish(samples):
            self._send(messages.Samples([[getattr(s, f) for f in FIELD_NAMES] for s in samples]))
        self._sampler = TelemetrySampler(targets_for(self.local_devices), rate_hz=hz, on_samples=publish,
                                         on_warning=lambda m: self._send(messages.Warned(m)))
        self._sampler.start()

    # ---- torchrun ----------------------------------------------------------------------------------
    def _read_output(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            with self._lock:
                self.output_tail = (self.output_tail + [line])[-OUTPUT_TAIL:]

    def _wait_torchrun(self) -> None:
        with os.fdopen(self._status_read, "r") as status:
            text = status.read()
        code = self.proc.wait()
        try:
            last = text.strip().splitlines()[-1] if text.strip() else "{}"
            report = codec.read(messages.TorchrunReport, last, "torchrun's status")
        except codec.WireError:
            report = messages.TorchrunReport()
        if not text.strip() and code != 0:
            report = messages.TorchrunReport(error=f"torchrun exited with status {code} without a word")
        with self._lock:
            output = list(self.output_tail)
        self._send(messages.TorchrunExit(code, failures=report.failures or {}, error=report.error,
                                         output=output, stopping=self._stopping.is_set()))

    # ---- the ranks' streams ------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_rank, args=(conn,), name="node-rank-stream", daemon=True).start()

    def _serve_rank(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as lines:
            conn.settimeout(HELLO_TIMEOUT_S)
            try:
                hello = codec.read(messages.StreamHello, lines.readline(), "a rank's stream")
            except (OSError, codec.WireError):
                return
            rank, stream = hello.rank, hello.stream
            conn.settimeout(None)
            if stream == "events":
                with self._lock:
                    self.rank_pids[rank] = hello.pid
                local = hello.local_rank
                if self._sampler is not None and local < len(self.local_devices):
                    self._sampler.set_pid(self.local_devices[local].name, hello.pid)
                self._send(messages.RankHello(rank, local, hello.pid))
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if stream == "events":
                    self._relay_event(rank, line)
                elif line:
                    self._send(messages.RankOutput(rank, stream, line))
            if stream == "events":
                self._send(messages.RankClosed(rank))

    def _relay_event(self, rank: int, line: str) -> None:
        try:
            event = codec.loads(line, "a rank's events")
            if not isinstance(event, dict):
                raise codec.WireError("not a JSON object", "a rank's events")
        except codec.WireError:
            self._send(messages.RankOutput(rank, "garbled", line[:200]))
            return
        try:
            typed = rank_events.decode(event)
        except codec.WireError:
            typed = None   # relayed as it came: the worker reads it and says what is wrong with it
        if isinstance(typed, rank_events.Profiled):
            self._send_file(rank, typed.path)
            self._send(messages.RankProfile(rank, event))
            return
        self._send(messages.RankEvent(rank, event))

    def _send_file(self, rank: int, path: str) -> None:
        """A rank's profiler trace, in chunks, to the coordinator's store (removed here)."""
        try:
            if os.path.getsize(path) <= MAX_PROFILE_BYTES:
                with open(path, "rb") as f:
                    while chunk := f.read(PROFILE_CHUNK):
                        self._send(messages.RankProfileChunk(rank, base64.b64encode(chunk).decode()))
        except OSError:
            pass  # the coordinator gets the event without the trace, and says it could not store it
        finally:
            if path.startswith(tempfile.gettempdir()) and os.path.exists(path):
                os.remove(path)

    def _send(self, message: messages.Message) -> None:
        try:
            self.send(message)
        except ConnectionError:
            pass  # the coordinator is gone; the session ends this run

    # ---- stop ---------------------------------------------------------------------------------------
    def stop(self) -> list[int]:
        """End torchrun and every rank (closing their stdin, SIGTERM, then SIGKILL), stop sampling, remove the
        folder. Returns the pids of ranks still alive after all that (none, unless the kernel refused)."""
        with self._lock:
            if self._stopped:
                return []
            self._stopped = True
        self._stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            for step in (lambda: self.proc.stdin.close(), lambda: self.proc.send_signal(signal.SIGTERM)):
                try:
                    step()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=KILL_GRACE_S + 0.5)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # the ranks follow by their parent-death signal
                self.proc.wait()
        remaining = self._end_ranks()
        if self._sampler is not None:
            self._sampler.stop()
        if self._server is not None:
            try:  # wakes the accepting thread (close alone does not, on Linux)
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
        if self.rendezvous is not None:
            self.rendezvous.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return remaining

    def _end_ranks(self) -> list[int]:
        """Ranks that outlived torchrun (they should not): killed by pid, if still ours; a watched script's with its
        process group (what the script started: engine/watch/bootstrap.py leads one)."""
        procs = []
        with self._lock:
            pids = list(self.rank_pids.values())
        for pid in pids:
            try:
                proc = psutil.Process(pid)
                if self.rank_module in " ".join(proc.cmdline()):
                    procs.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        for proc in procs:
            try:
                if self.ranks_lead_groups and proc.is_running() and os.getpgid(proc.pid) == proc.pid:
                    os.killpg(proc.pid, signal.SIGKILL)   # checked ours just now: the pid is not another's
                else:
                    proc.kill()
            except (psutil.NoSuchProcess, ProcessLookupError):
                pass
        _, alive = psutil.wait_procs(procs, timeout=KILL_GRACE_S)
        return [p.pid for p in alive]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

