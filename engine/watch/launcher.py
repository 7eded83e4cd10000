"""The ranks of a watched script: started as torchrun starts them, one per device, and read to their end.

Each rank is ``python -m engine.watch.bootstrap SCRIPT ARGS`` with torchrun's variables (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR/MASTER_PORT on loopback, gloo kept on
``lo``), one intra-op thread and, on a CPU virtual device, its core. A rank that fails ends the
others (their collectives would wait for it); Ctrl+C or ``stop()`` ends them all. No process
outlives the watch: each rank has its own process group, killed whole, and dies with us.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from engine.devices import Device, usable_cores
from engine.environment import with_project_path
from engine.record.rank_events import Done, Failed, StepReport, decode
from engine.record.time_by_kind import diagnosis
from engine.watch.summary import WatchSummary, device_times

KILL_GRACE_S = 1.0
HANG_AFTER_END_S = 120.0   # how long the other ranks may run on once one ended cleanly


@dataclass
class _Rank:
    rank: int
    device: Device
    proc: subprocess.Popen
    reports: list[StepReport] = field(default_factory=list)
    done: bool = False
    failed: Failed | None = None
    failed_at: float | None = None       # when its Failed came, or when we saw it end badly (monotonic)
    reader: threading.Thread | None = None


def free_port() -> int:
    """A port on loopback nobody listens on now (the script's rendezvous binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Watch:
    def __init__(self, script: str, args: list[str], devices: list[Device], *, steps: int | None = None,
                 warmup: int = 1, instruments: bool = True):
        self.script, self.args, self.devices = os.path.abspath(script), list(args), devices
        self.steps, self.warmup, self.instruments = steps, warmup, instruments
        self.ranks: list[_Rank] = []
        self.hung: list[int] = []   # ranks still running long after another ended cleanly
        self._stopped = threading.Event()
        # DataLoader workers go to the cores no device holds (none spare: they share their rank's, as under torchrun)
        held = {d.core for d in devices if d.core is not None}
        self.loader_cores = sorted(set(usable_cores()) - held)

    def run(self) -> WatchSummary:
        try:
            self._launch()
            self._wait()
        except KeyboardInterrupt:
            self._stopped.set()
        finally:
            self._end_all()
        return self._summary()

    def stop(self) -> None:
        self._stopped.set()

    def _launch(self) -> None:
        port, world = free_port(), len(self.devices)
        for rank, device in enumerate(self.devices):
            read_end, write_end = os.pipe()
            ours = dict(SPLITSCOPE_EVENT_FD=str(write_end), SPLITSCOPE_WATCH_DEVICE=device.name,
                        SPLITSCOPE_WATCH_PARENT=str(os.getpid()),
                        SPLITSCOPE_WATCH_INSTRUMENTS="1" if self.instruments else "0")
            if self.steps:
                ours["SPLITSCOPE_WATCH_STEPS"] = str(self.steps)
            if device.core is not None:
                ours["SPLITSCOPE_WATCH_CORE"] = str(device.core)
            if self.loader_cores:
                ours["SPLITSCOPE_WATCH_LOADER_CORES"] = ",".join(map(str, self.loader_cores))
            env = with_project_path(
                RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo",
                OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **ours)
            # The script runs where the user started us: it may read files beside it by relative paths.
            proc = subprocess.Popen([sys.executable, "-m", "engine.watch.bootstrap", self.script, *self.args],
                                    env=env, pass_fds=(write_end,), start_new_session=True)
            os.close(write_end)
            r = _Rank(rank, device, proc)
            r.reader = threading.Thread(target=self._read, args=(r, read_end), name=f"watch-rank-{rank}",
                                        daemon=True)
            r.reader.start()
            self.ranks.append(r)

    def _read(self, r: _Rank, fd: int) -> None:
        with os.fdopen(fd, encoding="utf-8") as lines:
            for line in lines:
                try:
                    event = decode(json.loads(line))
                except Exception:   # a line the bootstrap did not write whole: not an event
                    continue
                match event:
                    case StepReport():
                        r.reports.append(event)
                    case Done():
                        r.done = True
                    case Failed():
                        r.failed, r.failed_at = event, r.failed_at or time.monotonic()

    def _wait(self) -> None:
        """Until every rank ended, one ended badly (its peers would wait for it in their collectives), or the
        rest outlived the first clean end by HANG_AFTER_END_S (a script whose ranks run unequal steps)."""
        first_end = None
        while not self._stopped.is_set():
            now = time.monotonic()
            for r in self.ranks:
                if r.failed_at is None and r.proc.poll() not in (None, 0):
                    r.failed_at = now   # ended badly before we signalled anything: its own doing
            running = [r for r in self.ranks if r.proc.poll() is None]
            if not running or any(r.failed_at is not None for r in self.ranks):
                return
            if len(running) < len(self.ranks):
                first_end = first_end or now
                if now - first_end > HANG_AFTER_END_S:
                    self.hung = [r.rank for r in running]
                    return
            time.sleep(0.05)

    def _end_all(self) -> None:
        for r in self.ranks:
            if r.proc.poll() is None:
                _signal_group(r.proc, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE_S
        for r in self.ranks:
            try:
                r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(r.proc, signal.SIGKILL)   # the script's own children (DataLoader workers) too
            r.proc.wait()
            if r.reader is not None:
                r.reader.join(timeout=5.0)

    def _summary(self) -> WatchSummary:
        # The first rank to fail, by when: its peers' errors ("connection closed by peer") follow from it.
        culprits = sorted((r for r in self.ranks if r.failed_at is not None), key=lambda r: r.failed_at)
        first = culprits[0] if culprits else None
        failed = first if first is not None and first.failed else None
        died = first if first is not None and not first.failed else None
        status = "failed" if first or self.hung else "stopped" if self._stopped.is_set() else "finished"
        steps = min((len(r.reports) for r in self.ranks), default=0)
        last = [r.reports[steps - 1].loss_part for r in self.ranks if steps and r.reports[steps - 1].loss_part
                is not None]
        times = [t for r in self.ranks if (t := device_times(r.device.name, r.reports[:steps], self.warmup))]
        error = (f"rank {failed.rank} ({failed.device.name}): {failed.failed.message}" if failed else
                 f"rank {died.rank} ({died.device.name}) ended with status {died.proc.returncode}" if died else
                 f"rank {', '.join(map(str, self.hung))} still running {HANG_AFTER_END_S:.0f} s after another "
                 "ended: stopped" if self.hung else None)
        return WatchSummary(self.script, self.args, [d.name for d in self.devices], status, steps, self.warmup,
                            sum(last) / len(last) if last else None, times, diagnosis(times), error,
                            failed.failed.traceback if failed else None, self.loader_cores)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
