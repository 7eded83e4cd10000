"""The ranks of a run on this machine: their processes, their environment, and the threads that read them.

Each rank is forked by the session's fork server where it handed one over
(engine.forkserver: milliseconds), else started as a fresh interpreter; its
events come on a private pipe, its stdout and stderr on their own, each read by
a thread that puts what it reads on the worker's queue. The ranks meet through a
file in a private folder (``rendezvous_dir``) inside the session's folder for the
run (our ranks' temporary folder too), which the worker removes as it ends
(``clean_up``) and the session once the worker has ended however it ended
(engine/run/session.py). A run
over several machines has its ranks started by the nodes' agents instead
(engine.nodes.coordinator.NodeRanks), read into the same queue.
"""
from __future__ import annotations

import dataclasses
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

from engine import forkserver, strategies
from engine.config import ExperimentConfig
from engine.devices import Device
from engine.environment import ROOT, RUN_FOLDER, rank_base_environment, variable
from engine.measure.profiling import TRACE_PREFIX
from engine.models import model_imports
from engine.results import from_json
from engine.results.read_facts import ScriptFacts
from engine.run.heartbeat import STARTING
from engine.run.held_lines import enlarge_pipe, held_lines
from engine.run.resolved_run import ResolvedRun
from engine.wire import codec, rank as rank_events

# The rank processes' entry point where the strategy's (Strategy.rank_module) is not wanted: tests that stream
# hundreds of thousands of steps through the worker, the session and the store without torch name a synthetic
# rank here (tests/synthetic_rank.py).
RANK_MODULE = variable("SPLITSCOPE_RANK_MODULE")
# A rank's event lines wait this long in its pipe for the next ones, read together (engine/run/held_lines.py): a
# step's news reaches the worker up to this late; a hang timeout is seconds.
EVENT_HOLD_S = 0.05
OUTPUT_TAIL = 20   # a rank's last lines of output kept: what a script printed where it took no step


def rank_environment(base, *, rank: int, world: int, config_json: str, devices_json: str, event_fd: int,
                     store_file: str) -> dict[str, str]:
    """A rank process's environment on this machine: torchrun's variables, loopback only, a private pipe and
    rendezvous file."""
    return dict(rank_base_environment(base, config_json=config_json, devices_json=devices_json, interface="lo"),
                RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                SPLITSCOPE_EVENT_FD=str(event_fd), SPLITSCOPE_STORE_FILE=store_file)


# What a plain script's process (engine/strategies/script.py) must not get that a rank does: torchrun's
# variables, and the one thread a CPU virtual device runs (the user's own setting, if any, stays).
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                      "MASTER_PORT", "TORCHELASTIC_RUN_ID")


def plain_environment(env: dict[str, str], base) -> dict[str, str]:
    """``env`` (a rank's) as ``python SCRIPT.py`` would have it run from ``base``: no torchrun variables, the
    thread counts and network interfaces ``base`` has. (CUDA_DEVICE_ORDER stays PCI_BUS_ID: the GPUs' numbers
    must be NVML's for their telemetry; the bootstrap's own variables are the watch's.)"""
    plain = {key: value for key, value in env.items() if key not in TORCHRUN_VARIABLES}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        plain.pop(name, None)
        if name in base:
            plain[name] = base[name]
    return plain


def free_port() -> int:
    """A port on loopback nobody listens on now (a watched script's rendezvous binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_rank(proc, whole_group: bool) -> None:
    """SIGKILL a rank still running; ``whole_group``: with the process group it leads (a watched script's rank,
    engine/watch/bootstrap.py: what the script started, where its own SIGTERM handler never ran)."""
    if whole_group and proc.poll() is None:   # not yet reaped: its pid is still its own
        import psutil
        try:   # a daemon the script started in a session of its own: outside the group, but the rank's (its
            # subreaper's) descendant
            descendants = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            descendants = []
        try:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for descendant in descendants:
            try:
                descendant.kill()
            except psutil.Error:
                pass
    proc.kill()


def end_local_ranks(ranks, grace_s: float, whole_group: bool) -> None:
    """SIGTERM every rank still running, SIGKILL (kill_rank) what is left after ``grace_s``, reap all."""
    for r in ranks:
        if r.proc.poll() is None:
            try:
                r.proc.terminate()
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_s
    for r in ranks:
        try:
            r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_rank(r.proc, whole_group=whole_group)
            r.proc.wait()


class _LaunchStopped(Exception):
    """A stop came while a rank was being started: no more are."""


class Rank:
    def __init__(self, rank: int, device: Device, proc, events):
        self.rank, self.device, self.proc, self.events = rank, device, proc, events
        self.ready = False
        self.done = False
        self.error: rank_events.Failed | None = None
        self.last_step = -1
        self.last_heard = time.monotonic()   # its last progress: a phase begun, a step, anything but a heartbeat
        self.phase = STARTING                # engine/run/heartbeat.py
        self.alive_at: float | None = None   # its last heartbeat (None: none yet)
        self.where: str | None = None        # where its main thread was then
        self.in_collective = False
        self.param_sq: float | None = None
        self.change_sq: float | None = None
        self.split_backward = (None, None)   # its Done's split_backward_extra_s and _fixed_s
        self.split_backward_problem: str | None = None
        self.two_way_extra_s: float | None = None   # its Done's (engine/strategies/pipeline/exchange_probe.py)
        self.two_way_problem: str | None = None
        self.note: str | None = None   # what it said of its steps when done (a watched script's)
        self.script: dict | None = None         # and what it read of the script (ScriptFacts as JSON)
        self.unformulated: dict[str, float] | None = None   # its counted step's operations without a formula
        self.output_tail: list[str] = []        # its last lines of output (stdout)
        self.split = None
        self.stderr_tail: list[str] = []
        self.exit_seen = False
        self.events_closed = False
        self.output_closed = False   # its stdout read to the end (local ranks)
        self.plain = False           # a plain script's one process (engine/strategies/script.py), no rank of a group
        self.event_hold_s = 0.0      # how long its event lines wait for the next ones in its pipe (local ranks)

    def probe_notes(self) -> list[str]:
        """What the run's summary must say of the probes after its last step that did not measure."""
        notes = [f"{self.device.name}: a split backward's cost was not measured ({self.split_backward_problem}); "
                 "what-if takes it as free there"] if self.split_backward_problem else []
        return notes + ([f"two devices' sending to each other at once was not measured ({self.two_way_problem}); "
                         "what-if takes it as sending one way"] if self.two_way_problem else [])

    @property
    def label(self) -> str:
        pid = f"pid {self.proc.pid}" if self.proc.pid is not None else "not started"
        return f"{'the script' if self.plain else f'rank {self.rank}'} ({self.device.name}, {pid})"


class LocalRanks:
    def __init__(self, config: ExperimentConfig, resolved: ResolvedRun, events: queue.Queue,
                 stop_event: threading.Event, warn: Callable[[str], None]):
        self.config, self.resolved = config, resolved   # the run as the session resolved it
        self.devices, self.world, self.device_names = resolved.devices, resolved.world_size, resolved.device_names
        self.queue, self.stop_event, self.warn = events, stop_event, warn
        self.rendezvous_dir: str | None = None
        self.forks = forkserver.worker_connection()  # the session's fork server, when it handed one over
        strategy = strategies.get(config.strategy)
        self.module = RANK_MODULE or strategy.rank_module
        self.imports = strategy.rank_imports + model_imports(config.model)   # the fork server's, before it forks them
        # A script of the user's meets its peers as under torchrun (MASTER_ADDR/PORT); our ranks through a file.
        self.torchrun_rendezvous = not strategy.builds_model
        from engine.strategies.script import plain
        self.plain = self.torchrun_rendezvous and plain(config)   # one plain process: no torchrun variables

    def launch(self, ranks: list[Rank]) -> None:
        """Start each rank, appending it to ``ranks`` as it starts (a stop meanwhile leaves the ones started
        there for the worker to end)."""
        # The ranks meet through a file in a private folder, removed when the run ends (inside the session's folder
        # for the run, which the session removes should this worker be killed).
        self.rendezvous_dir = tempfile.mkdtemp(prefix="splitscope-rdzv-", dir=variable(RUN_FOLDER))
        store_file = os.path.join(self.rendezvous_dir, "store")
        device_json = rank_events.devices_text(self.devices)
        torchrun = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), LOCAL_WORLD_SIZE=str(self.world),
                        GROUP_RANK="0") if self.torchrun_rendezvous else {}
        # Our ranks' temporary files (a DataLoader worker's, which a stopped run's end kills before it can remove
        # them; a profile's trace until the session has stored it) in the session's folder for the run; a user's
        # script keeps the temporary folder it would have under torchrun.
        folder = variable(RUN_FOLDER)
        scratch = {"TMPDIR": folder} if folder and not self.torchrun_rendezvous else {}
        for rank in range(self.world):
            if self.stop_event.is_set():  # stopped while the first ranks started: the loop ends those
                return
            read_fd, write_fd = os.pipe()
            enlarged = enlarge_pipe(read_fd)
            env = dict(rank_environment(os.environ, rank=rank, world=self.world, config_json=self.config.to_json(),
                                        devices_json=device_json, event_fd=write_fd, store_file=store_file),
                       **torchrun, **scratch)
            if self.plain:
                env = plain_environment(env, os.environ)
            device = self.resolved.rank_devices(rank)[0]
            on = device.name if self.world > 1 else ", ".join(self.device_names)
            try:
                proc = self._start_rank(env, write_fd, f"(rank {rank} of {self.world} on {on})")
            except _LaunchStopped:
                os.close(read_fd)
                return
            finally:
                os.close(write_fd)
            r = Rank(rank, device, proc, os.fdopen(read_fd, "rb", buffering=0))
            r.event_hold_s = EVENT_HOLD_S if enlarged else 0.0
            r.plain = self.plain
            ranks.append(r)
            for target, name in ((self._read_events, "events"), (self._read_stdout, "stdout"),
                                 (self._read_stderr, "stderr")):
                threading.Thread(target=target, args=(r,), name=f"rank{rank}-{name}", daemon=True).start()

    def _start_rank(self, env: dict[str, str], event_fd: int, title: str):
        """A rank process: forked by the session's fork server when it handed one over (engine.forkserver;
        ``title`` after its command in ps), else a fresh interpreter."""
        if self.forks is not None:
            try:
                # A stop while the server still imports torch (the first run of a session) ends the wait.
                return forkserver.start_process(self.module, env=env, cwd=ROOT, pass_fds=(event_fd,),
                                                connection=self.forks, title=title, cancel=self.stop_event,
                                                imports=self.imports)
            except forkserver.ForkServerError as exc:
                forks, self.forks = self.forks, None
                if not isinstance(exc, forkserver.ForkServerRefused):
                    # Not answered (stopped, timed out): closed, a request still queued is not served and one
                    # served late ends at once. (Ranks it forked before end too: a server that stopped
                    # answering mid-launch fails the run.) A refusal leaves nothing queued: the ranks it
                    # forked live on.
                    forks.close()
                if self.stop_event.is_set():
                    raise _LaunchStopped() from exc
                self.warn(f"ranks start as fresh processes: {exc}")
        return forkserver.start_process(self.module, env=env, cwd=ROOT, pass_fds=(event_fd,))

    def _read_events(self, r: Rank) -> None:
        """A rank's events onto the queue in order, an item each (the queue's bound counts events); those read
        together are put together, so that the worker's loop wakes once for them."""
        for lines in held_lines(r.events.fileno(), r.event_hold_s):
            for line in lines:
                try:
                    self.queue.put(("event", r, codec.loads(line, "a rank's events")))
                except codec.WireError:
                    self.queue.put(("garbled", r, line))
        self.queue.put(("eof", r, None))

    def _read_stdout(self, r: Rank) -> None:
        for line in r.proc.stdout:
            self.queue.put(("stdout", r, line.decode("utf-8", "replace").rstrip()))
        self.queue.put(("stdout_eof", r, None))

    def _read_stderr(self, r: Rank) -> None:
        for line in r.proc.stderr:
            text = line.decode("utf-8", "replace").rstrip()
            r.stderr_tail = (r.stderr_tail + [text])[-40:]
            if self.torchrun_rendezvous:   # a user's script: its logging's lines and warnings are its output too
                self.queue.put(("stderr", r, text))


def script_facts(ranks: list[Rank], steps: int) -> ScriptFacts:
    """What a watched script's first rank read of it; where it took no step, its ranks' last lines of output and
    how its first process ended (engine/record/findings.py says them)."""
    first = ranks[0] if ranks else None
    facts = (from_json(ScriptFacts, first.script) if first is not None else None) or ScriptFacts()
    if steps or first is None:
        return facts
    code = first.proc.poll() if hasattr(first.proc, "poll") else None
    tail = [line for r in ranks for line in r.output_tail + r.stderr_tail][-OUTPUT_TAIL:]
    return dataclasses.replace(facts, output_tail=tail, exit_code=code)


def clean_up(local: LocalRanks | None, session_pid: int) -> None:
    """What a worker's run leaves on disk removed: its ranks' rendezvous folder (``local``: None before any rank
    started, and for a run over nodes), and the session's folder for the run unless it holds a profile's trace the
    session has yet to store (the session removes it then): a session that dies after its worker (the parent,
    ``session_pid`` at its start) would leave it."""
    if local is not None and local.rendezvous_dir:
        shutil.rmtree(local.rendezvous_dir, ignore_errors=True)
    folder = variable(RUN_FOLDER)
    if not folder or not os.path.isdir(folder):
        return
    if os.getppid() == session_pid and any(name.startswith(TRACE_PREFIX) for name in os.listdir(folder)):
        return
    shutil.rmtree(folder, ignore_errors=True)
