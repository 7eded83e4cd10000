"""A run, end to end, for the CLI and the app alike: worker process, telemetry, store.

``RunSession`` launches the worker (``python -m engine.run.worker``), reads its
events on a background thread, samples telemetry outside the worker (as
nvidia-smi would see the machine), stores steps, timeline and samples as they
come, and adds the telemetry section to the summary. Its caller's ``on_event`` gets
the worker's events (engine.events) once they are stored. Callbacks run on
background threads; the app marshals them to its UI thread.
"""
from __future__ import annotations

import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine import forkserver
from engine.config import ExperimentConfig
from engine.environment import ROOT, RUN_FOLDER, with_project_path
from engine.events import Errored, Finished, Launched, NodeSamples, ProfileSaved, Started, Warned, WorkerEvent
from engine.record.efficiency import with_energy
from engine.record.findings import with_telemetry
from engine.results import RunSummary, Step
from engine.run.event_batches import event_queue, next_batch, read_worker_events
from engine.store import default_path, open_store
from engine.store.client import StoreRestarts
from engine.telemetry.sample import DeviceSample
from engine.wire import worker as protocol

STOP_GRACE_S = 3.0  # the worker promises to end within 3 s of a stop
STORE_RESTARTED = ("the run store's process ended; a new one was started and the steps not yet stored were sent "
                   "to it again (nothing lost)")


def _fork_server_connection():
    """A connection to this process's fork server for the worker to fork its ranks by, or None (they start
    fresh)."""
    server = forkserver.shared()
    if server is None:
        return None
    try:
        return server.connection.hand_over()
    except forkserver.ForkServerError:
        return None


@dataclass
class _Reading:
    """What the reading thread has of the run so far: how it ended, as the worker said (Finished, Errored), and
    what came since the last batch was stored."""
    status: str = "failed"
    summary: RunSummary | None = None
    error: str | None = None
    tb: str | None = None
    pending: list[Step] = field(default_factory=list)
    remote: list = field(default_factory=list)  # the nodes' telemetry (NodeSamples), stored with the steps of its batch


@dataclass
class RunResult:
    run_id: str
    status: str                 # finished, failed, stopped
    summary: RunSummary | None
    error: str | None = None
    traceback: str | None = None
    store_failed: bool = False  # the run ended because the store could not be written: so will the next


class RunSession:
    def __init__(self, config: ExperimentConfig, *, db_path=None, telemetry_hz: float = 10.0,
                 on_event: Callable[[WorkerEvent], None] | None = None,
                 on_samples: Callable[[list], None] | None = None,
                 experiment_id: str | None = None, label: str | None = None):
        self.config = config
        self.db_path = db_path
        self.telemetry_hz = telemetry_hz
        self.on_event = on_event
        self.on_samples = on_samples
        self.experiment_id = experiment_id
        self.label = label
        self.run_id: str | None = None
        self.result: RunResult | None = None
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._stdin_lock = threading.Lock()
        self._sampler = None
        self._reader_cpu_s: float | None = None    # the reading thread's CPU seconds, once the worker's output ends
        self._recorder_cpu_from: float | None = None   # the recording thread's CPU seconds at the first step
        self._sampler_cpu_from = 0.0                   # and the telemetry sampler's
        self._stderr_tail: list[str] = []
        self._store_error: str | None = None
        self._notices: list[Warned] = []   # the session's own, handed on with the next batch's events
        # Every write goes through it, riding through the store process's end: ``again`` sends what the store had not
        # acknowledged; the window is told once it is stored.
        self._stored = StoreRestarts(lambda: self._notices.append(Warned(t=self._now(), message=STORE_RESTARTED))).write
        self._folder: str | None = None
        self.resolved = None   # engine/run/resolved_run.py ResolvedRun, once started

    # ---- control --------------------------------------------------------------
    def start(self) -> str:
        with open_store(self.db_path) as store:
            self.run_id = store.create_run(self.config.to_dict(), experiment_id=self.experiment_id,
                                           label=self.label)
        self._origin = time.perf_counter()
        try:
            # Resolved once, here (engine/run/resolved_run.py): devices that do not exist end the start, said why.
            from engine.run.resolved_run import resolve
            self.resolved = resolve(self.config)
            self._start_sampler()
            # What the worker keeps on disk for the run (its ranks' rendezvous file) goes in a folder this process
            # removes when the run ends: a worker killed outright cannot remove its own.
            self._folder = tempfile.mkdtemp(prefix="splitscope-run-")
            env = with_project_path(PYTHONUNBUFFERED="1", **{RUN_FOLDER: self._folder})
            forks = _fork_server_connection()
            env.pop(forkserver.CONNECTION_ENV, None)  # one this process was handed is not the worker's
            if forks is not None:
                env[forkserver.CONNECTION_ENV] = str(forks.fileno())
            try:
                # Own session: a Ctrl-C in the terminal reaches us, and we stop the run in order.
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "engine.run.worker"], cwd=ROOT, env=env, start_new_session=True,
                    pass_fds=(forks.fileno(),) if forks is not None else (),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            finally:
                if forks is not None:
                    forks.close()  # the worker's now
        except BaseException as exc:
            # Nothing is left running, and the stored run says why rather than staying "running".
            if self._sampler is not None:
                self._sampler.stop()
            self._remove_folder()
            error = f"the run could not start: {type(exc).__name__}: {exc}"
            with open_store(self.db_path) as store:
                store.finish_run(self.run_id, "failed", None, error, None)
            self.result = RunResult(self.run_id, "failed", None, error)
            self._done.set()
            raise
        first = protocol.request_line(protocol.RunRequest(
            self.config.to_dict(), self._origin, self.telemetry_hz, self.run_id,
            self.resolved.to_dict()))
        self._send(first)
        threading.Thread(target=self._read_stderr, name="worker-stderr", daemon=True).start()
        self._thread = threading.Thread(target=self._run, name=f"run-session-{self.run_id}", daemon=True)
        self._thread.start()
        return self.run_id

    def stop(self) -> None:
        """Ask the worker to stop; returns at once. The run ends within about 3 s."""
        if not self._send(protocol.STOP) and self._proc and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """End the worker and its ranks now, for when stop is ignored: SIGKILL to the worker's process group
        (ranks started fresh are in it); ranks the fork server forked get its SIGKILL the moment the dead
        worker's connection to it closes (engine/forkserver/server.py)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # the worker leads its own group
            except ProcessLookupError:
                pass

    def wait(self, timeout: float | None = None) -> RunResult | None:
        self._done.wait(timeout)
        return self.result

    def is_running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    @property
    def folder(self) -> str | None:
        """The run's temporary folder on disk (the ranks' rendezvous and temporary files), gone once it ends."""
        return self._folder

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _send(self, line: str) -> bool:
        with self._stdin_lock:
            try:
                self._proc.stdin.write((line + "\n").encode())
                self._proc.stdin.flush()
                return True
            except (BrokenPipeError, ValueError, OSError, AttributeError):
                return False

    # ---- telemetry ------------------------------------------------------------
    def _start_sampler(self) -> None:
        # A run over nodes is sampled by each node's agent: its samples come with the worker's events.
        if not self.telemetry_hz or self.config.nodes:
            return
        from engine.cores import usable_cores
        from engine.run.loader_placement import LOADER_SERIES, sampled_cores
        from engine.telemetry import CpuTarget, TelemetrySampler, targets_for
        devices = self.resolved.devices
        # A DataLoader's workers on cores of their own: those cores are sampled too, as the loader's series.
        loader = [CpuTarget(LOADER_SERIES.format(core), core)
                  for core in sampled_cores(self.config, devices, usable_cores())]
        self._sampler = TelemetrySampler(targets_for(devices) + loader, rate_hz=self.telemetry_hz)
        self._sampler.start()

    def _store_profile(self, recorder, event: ProfileSaved) -> Warned | None:
        """A rank's torch.profiler trace, moved from its file into the run store (engine.measure.profiling); a warning
        for the user when it could not be."""
        path = event.path
        try:
            with open(path, "rb") as f:
                trace = f.read()
            self._stored(lambda: recorder.add_profile(event.rank, event.device, event.t0, trace),
                         lambda: recorder.add_profile(event.rank, event.device, event.t0, trace, again=True))
            return None
        except (OSError, ValueError, sqlite3.Error) as exc:
            return Warned(t=self._now(), message=f"the profile of rank {event.rank} could not be stored: {exc}")
        finally:
            if path.startswith(tempfile.gettempdir()) and os.path.exists(path):
                os.remove(path)

    def _remove_folder(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def _now(self) -> float:
        return time.perf_counter() - self._origin

    def _record(self, recorder, steps: list[Step], remote: list | None = None) -> None:
        """Store a batch of steps with the telemetry drained meanwhile (and what the nodes sampled); then hand the
        samples on."""
        samples = self._sampler.drain() if self._sampler is not None else []
        samples.extend(remote or [])
        self._stored(lambda: recorder.record(steps, samples), recorder.resend)
        if samples and self.on_samples:
            self.on_samples(samples)

    def _take_notices(self) -> list[Warned]:
        notices, self._notices = self._notices, []
        return notices

    # ---- the reading thread -----------------------------------------------------
    def _read_stderr(self) -> None:
        for line in self._proc.stderr:
            self._stderr_tail = (self._stderr_tail + [line.decode("utf-8", "replace").rstrip()])[-40:]

    def _read_stdout(self, events: queue.Queue) -> None:
        def took(reader_cpu_s: float | None) -> None:
            self._reader_cpu_s = reader_cpu_s
        read_worker_events(self._proc.stdout, events, self._done, took)

    def _run(self) -> None:
        from engine.record.recorder import RunRecorder
        store = None
        recorder = None
        reading = _Reading()
        events = event_queue()
        threading.Thread(target=self._read_stdout, args=(events,), name="worker-stdout", daemon=True).start()
        try:
            try:
                store = self._stored(lambda: open_store(self.db_path))
            except (sqlite3.Error, OSError) as exc:   # gone or damaged since the run was created: it ends, said why
                self._store_error = f"cannot write the run store {self.db_path or default_path()}: {exc}"
                return   # the finally below ends the worker and the run, as failed
            recorder = RunRecorder(store, self.run_id, self._origin, timeline=self.config.timeline,
                                   warmup=self.config.warmup,
                                   device_names=self.resolved.device_names,
                                   telemetry_hz=self.telemetry_hz)
            while not self._take_batch(next_batch(events), store, recorder, reading):
                pass
            self._wait_for_worker(reading)
        finally:
            try:
                self._finalize(store, recorder, reading.pending, reading.status, reading.summary, reading.error,
                               reading.tb)
            finally:
                self._remove_folder()
                self._done.set()  # whatever happened, waiters must not hang

    def _take_batch(self, batch: list, store, recorder, reading: _Reading) -> bool:
        """A batch of the worker's events: its steps stored, then its events handed on. True at the end of the
        worker's output."""
        forward = []
        ended = False
        for event in batch:
            if event is None:
                ended = True
                break
            self._take_event(event, recorder, reading, forward)
        # Stored before anyone is told: nothing a user has seen can be lost.
        batch_steps, reading.pending = reading.pending, []  # recorded once, whatever happens next
        batch_samples, reading.remote = reading.remote, []
        if self._store_error is None:
            try:
                self._record(recorder, batch_steps, batch_samples)
            except sqlite3.Error as exc:
                # A full or read-only disk: end the run and say so; what is stored stays intact.
                self._store_error = f"cannot write the run store {store.path}: {exc}"
                forward.append(Errored(t=self._now(), message=self._store_error))
                self.stop()
        forward.extend(self._take_notices())
        if self.on_event:
            for event in forward:
                self.on_event(event)
        return ended

    def _take_event(self, event: WorkerEvent, recorder, reading: _Reading, forward: list) -> None:
        """One of the worker's events read into ``reading``; what is handed on of it goes to ``forward``."""
        match event:
            case Launched() | Started() if self._sampler is not None:
                for device, pid in event.device_pids.items():
                    self._sampler.set_pid(device, pid)
            case Step():
                if self._recorder_cpu_from is None:   # the recording's cost from the first step
                    self._recorder_cpu_from = time.thread_time()
                    self._sampler_cpu_from = self._sampler.cpu_time_s if self._sampler else 0.0
                reading.pending.append(event)
            case NodeSamples():
                reading.remote.extend(DeviceSample(*row) for row in event.rows)
                return  # handed on as samples (on_samples), not as an event
            case ProfileSaved():
                warning = self._store_profile(recorder, event)
                if warning is not None:
                    forward.append(warning)
            case Errored():
                reading.error, reading.tb = event.message, event.traceback
            case Finished():
                reading.status, reading.summary = event.status, event.summary
                return  # forwarded at the end, with the telemetry section
        forward.append(event)

    def _wait_for_worker(self, reading: _Reading) -> None:
        """The worker's end; where it died without a word, say how, with what it printed last."""
        code = self._proc.wait()
        if reading.summary is None and reading.error is None:
            from engine.run.failure import describe_exit
            reading.error = f"the worker (pid {self._proc.pid}) {describe_exit(code)}"
            if self._stderr_tail:
                reading.error += f"; last output: {self._stderr_tail[-1]}"
                reading.tb = "\n".join(self._stderr_tail)
            if self.on_event:
                self.on_event(Errored(t=self._now(), message=reading.error, traceback=reading.tb))

    def _finalize(self, store, recorder, pending, status, summary, error, tb) -> None:
        if self._store_error is not None:
            status, error = "failed", self._store_error
        try:
            if self._sampler is not None:
                self._sampler.stop()
            if self._store_error is None and recorder is not None:
                try:
                    self._record(recorder, pending)
                    self._stored(recorder.finish)
                except sqlite3.Error as exc:   # the run's row is still told why, below
                    self._store_error = f"cannot write the run store {store.path}: {exc}"
                    status, error = "failed", self._store_error
            summary = self._complete_summary(summary, recorder, status)
            if store is not None:
                status, error = self._store_end(store, status, summary, error, tb)
        finally:
            if store is not None:
                store.close()
            self.result = RunResult(self.run_id, status, summary, error, tb, self._store_error is not None)
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            for pipe in (self._proc.stdin, self._proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
        if self.on_event:
            for notice in self._take_notices():
                self.on_event(notice)
            self.on_event(Finished(t=self._now(), status=status, summary=summary, run_id=self.run_id, error=error,
                                   traceback=tb))

    def _store_end(self, store, status: str, summary: RunSummary | None, error: str | None,
                   tb: str | None) -> tuple[str, str | None]:
        """The run's row says how it ended, and the status and error it says. A store that failed a write may still
        take this one, and a full disk that will not take the summary may take the failure alone, with its
        error: a row left "running" would be marked interrupted by the next open, the error lost."""
        try:
            self._stored(lambda: store.finish_run(self.run_id, status, summary, error, tb))
            return status, error
        except sqlite3.Error as exc:
            self._store_error = self._store_error or f"cannot write the run store {store.path}: {exc}"
        try:
            store.finish_run(self.run_id, "failed", None, self._store_error, None)
        except sqlite3.Error:
            pass   # nothing can be written: the result says why, the next open marks the run interrupted
        return "failed", self._store_error

    def _recording_cpu(self, summary: RunSummary) -> dict[str, float] | None:
        """CPU seconds a step of the recording took: the worker's (as it said), this session's reading and recording
        threads' and the telemetry sampler's, over the run's steps."""
        if summary.steps < 2 or self._recorder_cpu_from is None:
            return summary.recording_cpu_s
        steps = summary.steps - 1   # from the first step's arrival on, as the worker counts its own
        session = time.thread_time() - self._recorder_cpu_from + (self._reader_cpu_s or 0.0)
        found = dict(summary.recording_cpu_s or {}, session=session / steps)
        if self._sampler is not None:
            found["telemetry"] = (self._sampler.cpu_time_s - self._sampler_cpu_from) / steps
        return found

    def _complete_summary(self, summary: RunSummary | None, recorder, status: str) -> RunSummary | None:
        if summary is None:
            return None
        summary = summary.replace(run_id=self.run_id, status=status, recording_cpu_s=self._recording_cpu(summary))
        if recorder is not None:
            summary = summary.replace(timeline_steps=recorder.timeline_kept)  # steps whose intervals were kept
        sampled = self._sampler is not None or (self.config.nodes and self.telemetry_hz)
        if sampled and recorder is not None and recorder.steps:
            summary = summary.replace(telemetry=recorder.telemetry_summary(summary.devices_busy, summary.devices))
        if summary.efficiency is not None:
            summary = summary.replace(efficiency=with_energy(summary.efficiency, summary.devices, summary.telemetry))
        return with_telemetry(summary)
