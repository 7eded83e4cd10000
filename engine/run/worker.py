"""The worker process (``python -m engine.run.worker``): runs one config and speaks the JSON Lines protocol.

It reads the config as the first line of stdin, launches one rank process per
process the strategy needs, merges their step reports into step events on
stdout, and ends with a ``finished`` event. It supervises and imports no torch,
so it starts fast and stays responsive while ranks compute.

Ends of a run, and what the worker does:
- every rank done: ``finished`` with status finished, exit 0;
- a rank fails, dies or hangs: every other rank is killed, then ``error`` naming
  the rank and the cause, ``finished`` with status failed, exit 1;
- ``stop`` on stdin or SIGTERM: ranks are ended (SIGTERM, then SIGKILL after a
  grace period), ``finished`` with status stopped, exit 1, within 3 s;
- stdin closes (the parent died): as stop.
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

from engine import strategies
from engine.config import ConfigError, ExperimentConfig
from engine.devices import DeviceError
from engine.events import Errored, Finished, Launched, Log, NodeSamples, ProfileSaved, Started, Warned, WorkerEvent
from engine.record.step_merger import StepMerger
from engine.record.summary import summarize
from engine.record.totals import RunTotals
from engine.results import Step
from engine.rules import effective_batch_size
from engine.run.event_writer import EventWriter
from engine.run.failure import Cause, Failure, hang_cause, noted
from engine.run.heartbeat import TRAINING
from engine.run.local_ranks import OUTPUT_TAIL, LocalRanks, Rank, clean_up, end_local_ranks, script_facts
from engine.run.resolved_run import ResolvedRun, resolve
from engine.wire import codec, rank as rank_events, worker as protocol

KILL_GRACE_S = 1.0     # SIGTERM, then SIGKILL after this
RANK_EVENT_BACKLOG = 1024  # rank events waiting to be merged, at most
REMOTE_EXIT_WAIT_S = 10.0  # after every rank on the nodes is done, how long their torchruns get to end
MERGE_WAIT_S = 1.0     # after a stop ended the ranks, how long what is left in their event pipes may take to be read
OUTPUT_DRAIN_S = 2.0   # after every rank ended, how long their last lines of output may take to be read
CHECK_EVERY_S = 0.05   # the loop's checks over every rank (exits, hangs), at most this far apart while events pour in


class Worker:
    def __init__(self, config: ExperimentConfig, resolved: ResolvedRun, origin: float, out, *, links=None,
                 telemetry_hz: float = 10.0, run_id: str | None = None):
        self._cpu_from: float | None = None   # the process's CPU time at the first merged step
        self.config = config
        self.links = links          # engine.nodes.node_link.NodeLink per node, when the run spans nodes
        self.nodes = None           # their NodeRanks, once launched
        self.telemetry_hz = telemetry_hz
        self.run_id = run_id
        self.resolved = resolved   # the run as the session resolved it (engine/run/resolved_run.py)
        self.devices = resolved.devices
        self.origin = origin
        self.out = EventWriter(out)   # the merged steps' lines a few together (engine/run/event_writer.py)
        self.strategy = strategies.get(config.strategy)
        self.world = resolved.world_size
        # Bounded: a recorder that falls behind makes the ranks wait, rather than this process hold the backlog.
        self.queue: queue.Queue = queue.Queue(maxsize=RANK_EVENT_BACKLOG)
        # A stop does not queue behind rank events: it is seen on the next pass, whatever is waiting.
        self.stop_event = threading.Event()
        self.ranks: list[Rank] = []
        self.device_names = resolved.device_names
        self.merger = StepMerger(self.world, self.device_names, origin,
                                 pair_collectives=self.strategy.collectives_span_all_ranks,
                                 loss_parts=self.strategy.builds_model)
        self.totals = RunTotals(self.device_names, config.warmup)
        self.batch_norm = False  # the model has BatchNorm (the ranks say so when ready)
        self.schedule_plan = None   # the schedule's action list per rank (rank 0 says it when ready; wire: `plan`)
        self.peaks: dict[str, dict] = {}   # each device's peak FLOP/s, as its rank measured it when ready
        self.started_sent = False
        self.split = None
        self.local: LocalRanks | None = None   # the ranks on this machine, once launched
        self._ending = threading.Event()  # end_ranks began: what the nodes still send is dropped

    # ---- output -------------------------------------------------------------
    def emit(self, kind: type, **fields) -> None:
        """An event of ``kind`` (engine.events) with these fields, at this moment."""
        self.send(kind(t=time.perf_counter() - self.origin, **fields))

    def send(self, event: WorkerEvent) -> None:
        self.out.write(protocol.encode(event), hold=isinstance(event, Step))

    # ---- launching ----------------------------------------------------------
    def launch(self) -> None:
        if self.links:
            self._launch_on_nodes()
        else:
            self.local = LocalRanks(self.config, self.resolved, self.queue, self.stop_event,
                                    warn=lambda message: self.emit(Warned, message=message))
            self.local.launch(self.ranks)

    def _launch_on_nodes(self) -> None:
        """Ranks on the nodes' machines, started by their agents; they report through the same queue."""
        import uuid

        from engine.nodes.coordinator import NodeRanks
        self.nodes = NodeRanks(self.config, self.links, self.devices, telemetry_hz=self.telemetry_hz,
                               run_id=self.run_id or uuid.uuid4().hex, put=self._from_node)
        self.ranks = [Rank(k, device, process, None) for k, (device, process) in
                      enumerate(zip(self.devices, self.nodes.processes, strict=True))]
        self.nodes.launch()

    def _from_node(self, kind: str, key, payload) -> None:
        """What NodeRanks hands over, in the loop's terms: most of it keyed by a rank."""
        if kind in ("node_lost", "node_error", "samples", "warning"):
            self._enqueue((kind, key, payload))
            return
        r = self.ranks[key]
        if kind == "stderr":
            r.stderr_tail = (r.stderr_tail + [payload])[-40:]
        else:
            self._enqueue((kind, r, payload))

    def _enqueue(self, item) -> None:
        """Into the bounded queue, waiting while the loop is behind; once the ranks are being ended nothing more
        is taken (a node's reader must get on to its agent's "ended")."""
        while not self._ending.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    # ---- the supervision loop ----------------------------------------------
    def run(self) -> int:
        failure = self._launch_and_announce()   # the causes seen so far, once anything failed
        stop_requested = False
        checked_at = 0.0
        while True:
            kind, r, payload = self._next_item()
            stop_requested = stop_requested or self.stop_event.is_set()
            failure = self._on_item(kind, r, payload, failure)
            self.out.write_due()
            # The checks below go over every rank (after each event: quadratic in the ranks); a plain step
            # event waits for them at most CHECK_EVERY_S, anything else (done, failure, stop, quiet) does not.
            now = time.monotonic()
            if (kind == "event" and failure is None and not stop_requested and not r.done
                    and now - checked_at < CHECK_EVERY_S):
                continue
            checked_at = now
            failure = self._note_exits(failure)
            if failure is None and not stop_requested:
                failure = self._check_hang(failure)
            status = self._end_if_over(stop_requested, failure)
            if status is not None:
                return status

    def _launch_and_announce(self) -> Failure | None:
        """The ranks launched and ``launched`` said; the failure, where a node refused the launch."""
        failure: Failure | None = None
        try:
            self.launch()
        except ConnectionError as exc:  # a node refused the launch or is gone (engine.nodes.coordinator.NodeError)
            failure = noted(failure, Cause("node", None, str(exc)))
        # The rank processes exist now; torch, the model and the rendezvous take seconds
        # more. Telemetry follows each process's memory from here, not from `started`.
        self.emit(Launched, pids={str(rr.rank): rr.proc.pid for rr in self.ranks if rr.proc.pid},
                  device_pids=self.device_pids(), devices=self.device_names, **self._nodes_field())
        return failure

    def _next_item(self) -> tuple:
        """The queue's next (kind, rank or key, payload), waiting at most 0.1 s; kind None when none came."""
        try:
            return self.queue.get(timeout=0.1)
        except queue.Empty:
            return None, None, None

    def _on_item(self, kind: str | None, r, payload, failure: Failure | None) -> Failure | None:
        """One item from the queue (a rank's event or output, a node's news) handled; the failure so far."""
        if kind == "event":
            failure = self._on_rank_message(r, payload, failure)
        elif kind in ("stdout", "stdout_eof", "stderr"):
            self._on_output(kind, r, payload)
        elif kind == "garbled":
            self.emit(Warned, message=f"{r.label} sent a garbled line: {payload[:200]!r}")
        elif kind == "eof":
            r.events_closed = True
        elif kind == "samples":
            self.emit(NodeSamples, rows=payload)
        elif kind == "warning":
            self.emit(Warned, message=payload)
        elif kind in ("node_lost", "node_error"):
            failure = noted(failure, Cause("node", r, f"lost: {payload}" if kind == "node_lost" else payload))
        return failure

    def _note_exits(self, failure: Failure | None) -> Failure | None:
        """Processes that ended: a non-zero exit, or a clean one before the rank said it was done, ends the run."""
        for rr in self.ranks:
            code = rr.proc.poll()
            quit_early = code == 0 and rr.events_closed and not rr.done
            if code is not None and (code != 0 or quit_early) and not rr.exit_seen:
                rr.exit_seen = True
                failure = noted(failure, Cause("exit", rr, code))
        return failure

    def _end_if_over(self, stop_requested: bool, failure: Failure | None) -> int | None:
        """The run ended (stopped, failed or finished) and its exit code, once it is over; None while it is not."""
        if stop_requested or failure is not None or any(rr.done for rr in self.ranks):
            self.out.write_all()   # what follows may wait seconds (ends, reaping): no step held through a kill
        if stop_requested:
            self.end_ranks()
            self._merge_what_is_queued()
            return self.finish("stopped")
        if failure is not None and failure.settled():
            self.end_ranks()
            self.emit(Errored, **failure.root().error_fields())
            return self.finish("failed")
        if all(rr.done for rr in self.ranks) and all(rr.proc.poll() is not None for rr in self.ranks):
            self._read_last_output()
            return self.finish("finished")
        if all(rr.done for rr in self.ranks) and self.nodes is not None:
            # Done everywhere: each node's torchrun ends once every node's has (its exit barrier).
            deadline = time.monotonic() + REMOTE_EXIT_WAIT_S
            for rr in self.ranks:
                try:
                    rr.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    break
            return self.finish("finished")
        if all(rr.done for rr in self.ranks):
            # done reported: give the processes a moment to exit, then reap them
            for rr in self.ranks:
                try:
                    rr.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    rr.proc.kill()
                    rr.proc.wait()
        return None

    def _read_last_output(self) -> None:
        """What the ranks printed as they ended (a script's last line, its final loss, comes as it exits): their
        output read to its end, within OUTPUT_DRAIN_S, and said, before the run is finished."""
        if self.local is None:
            return
        deadline = time.monotonic() + OUTPUT_DRAIN_S
        while not all(rr.output_closed for rr in self.ranks) and time.monotonic() < deadline:
            try:
                kind, r, payload = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if kind in ("stdout", "stdout_eof", "stderr"):
                self._on_output(kind, r, payload)
            elif kind == "event":
                self._on_rank_message(r, payload, None, steps_only=True)

    def _on_output(self, kind: str, r: Rank, line: str | None) -> None:
        """A line a rank printed (the run's log; a watched script's stderr too), or the end of its output."""
        if kind == "stdout_eof":
            r.output_closed = True
        elif line:
            if kind == "stdout":
                r.output_tail = (r.output_tail + [line])[-OUTPUT_TAIL:]   # said where a script took no step
            self.emit(Log, message=line, rank=r.rank)

    def _merge_what_is_queued(self) -> None:
        """Steps the ranks finished before a stop are the run's too: merge the events still queued, and those
        still in the ranks' pipes (read a few at a time, engine/run/held_lines.py) as their readers reach the
        pipes' ends, within MERGE_WAIT_S."""
        deadline = time.monotonic() + MERGE_WAIT_S
        while True:
            reading = self.local is not None and not all(rr.events_closed for rr in self.ranks)
            try:
                if reading:
                    kind, r, payload = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
                else:
                    kind, r, payload = self.queue.get_nowait()
            except queue.Empty:
                return
            if kind == "eof":
                r.events_closed = True
            elif kind == "event":
                self._on_rank_message(r, payload, None, steps_only=True)

    def _on_rank_message(self, r: Rank, message: dict, failure: Failure | None, steps_only: bool = False):
        """A line of JSON from a rank (engine/wire/rank.py), read back into its event."""
        now = time.monotonic()
        r.alive_at = now
        try:
            event = rank_events.decode(message)
        except codec.WireError:
            r.last_heard = now
            self.emit(Warned, message=f"{r.label} sent an event this worker cannot read: "
                                                f"{str(message)[:200]}")
            return failure
        if isinstance(event, rank_events.Alive):   # the process answers; no progress (engine/run/heartbeat.py)
            # Not its phase: the heartbeat reads it before it writes, so an Alive can come after a newer Phase event
            # and would set the rank's phase back (the Phase events say it; Alive.phase is for the rank's log)
            r.where, r.in_collective = event.where, event.in_collective
            return failure
        r.last_heard = now
        if event is None or (steps_only and not isinstance(event, rank_events.StepReport)):
            return failure
        return self._on_rank_event(r, event, failure)

    def _on_rank_event(self, r: Rank, event: rank_events.RankEvent, failure: Failure | None):
        if isinstance(event, rank_events.Phase):
            r.phase = event.name
        elif isinstance(event, rank_events.Ready):
            r.ready, r.split, r.phase = True, event.split, TRAINING
            self.batch_norm = self.batch_norm or event.batch_norm
            self.schedule_plan = self.schedule_plan or event.plan
            self.peaks.update(event.peaks or {})
            if all(rr.ready for rr in self.ranks) and not self.started_sent:
                self._send_started()
        elif isinstance(event, rank_events.StepReport):
            r.last_step = event.step
            merged = self.merger.add(r.rank, event)
            if merged is not None:
                if self._cpu_from is None:   # from the first step on: the recording's own cost, not the start-up
                    self._cpu_from = time.process_time()
                self.totals.add(merged)
                self.send(merged)
        elif isinstance(event, rank_events.Profiled):
            self.emit(ProfileSaved, rank=r.rank, device=r.device.name, path=event.path, t0=event.start - self.origin)
        elif isinstance(event, rank_events.Done):
            r.done, r.param_sq, r.change_sq = True, event.param_sq, event.change_sq
            r.split_backward = (event.split_backward_extra_s, event.split_backward_fixed_s)
            r.split_backward_problem = event.split_backward_problem
            r.two_way_extra_s, r.two_way_problem = event.two_way_extra_s, event.two_way_problem
            r.note, r.script, r.unformulated = event.note, event.script, event.unformulated
            self.peaks.update(event.peaks or {})   # a watched script's: known once it has run (its dtype)
        elif isinstance(event, rank_events.Failed):
            r.error = event
            failure = noted(failure, Cause("error", r, event))
        return failure

    def _nodes_field(self) -> dict:
        return {"nodes": [link.summary() for link in self.links]} if self.links else {}

    def device_pids(self) -> dict[str, int]:
        """The process on each device (one process serves every device when world is 1); none on other nodes:
        their agents sample them."""
        if self.links:
            return {}
        if self.world > 1:
            return {rr.device.name: rr.proc.pid for rr in self.ranks}
        return {name: rr.proc.pid for rr in self.ranks for name in self.device_names}

    def _send_started(self) -> None:
        self.started_sent = True
        split = next((rr.split for rr in self.ranks if rr.split is not None), None)
        self.split = split
        self.emit(Started, pids={str(rr.rank): rr.proc.pid for rr in self.ranks},
                  worker_pid=os.getpid(), devices=list(self.devices),
                  device_pids=self.device_pids(),
                  config=self.config.to_dict(), split=split, world_size=self.world,
                  micro_batches=self.resolved.micro_batches, clock_origin=self.origin,
                  theory_bubble=self.resolved.theory_bubble, theory_text=self.resolved.theory_text,
                  notes=self.notes(),
                  plan=self.schedule_plan, peaks=dict(self.peaks), **self._nodes_field())

    def notes(self) -> list[str]:
        """What the user must know to read this run's result (engine/run/run_notes.py)."""
        from engine.run.run_notes import run_notes
        return run_notes(self.config, self.resolved, self.strategy.builds_model, self.batch_norm,
                         self.ranks)

    def _check_hang(self, failure: Failure | None) -> Failure | None:
        cause = hang_cause(self.ranks, time.monotonic(), self.config.hang_timeout_s)
        return failure if cause is None else noted(failure, cause)

    def end_ranks(self) -> None:
        """SIGTERM every rank, SIGKILL what is left after the grace period, reap all. On nodes: every agent ends
        its ranks."""
        if self.nodes is not None:
            self._ending.set()
            self.nodes.stop()
            return
        if self.links:
            for link in self.links:  # connected, never launched
                link.channel.close()
            return
        end_local_ranks(self.ranks, KILL_GRACE_S, whole_group=not self.strategy.builds_model)

    def finish(self, status: str) -> int:
        finished = status == "finished"
        parts = [rr.param_sq for rr in self.ranks if rr.param_sq is not None] if finished else []
        changes = [rr.change_sq for rr in self.ranks if rr.change_sq is not None] if finished else []
        summary = summarize(
            run_id=None, status=status, config=self.config, devices=self.device_names,
            split=self.split or next((rr.split for rr in self.ranks if rr.split), None),
            micro_batches=self.resolved.micro_batches, batch_size=effective_batch_size(self.config),
            totals=self.totals, param_sq_parts=parts, change_sq_parts=changes,
            data_parallel=self.strategy.data_parallel, theory_bubble=self.resolved.theory_bubble,
            notes=self.notes(), theory_text=self.resolved.theory_text, plan=self.schedule_plan,
            nodes=[link.summary() for link in self.links] if self.links else None,
            split_backward={rr.device.name: rr.split_backward for rr in self.ranks
                            if finished and rr.split_backward[0] is not None},
            peaks=self.peaks, two_way_extra_s=max((rr.two_way_extra_s for rr in self.ranks
                                                   if finished and rr.two_way_extra_s is not None), default=None),
            recording_cpu_s=(time.process_time() - self._cpu_from) / (self.totals.steps - 1)
            if self._cpu_from is not None and self.totals.steps > 1 else None,
            world=self.world,
            script=None if self.strategy.builds_model else script_facts(self.ranks, self.totals.steps),
            unformulated=next((rr.unformulated for rr in self.ranks if rr.unformulated), None))
        self.emit(Finished, status=status, summary=summary)
        return 0 if status == "finished" else 1


def _watch_stdin(stop: threading.Event) -> None:
    """Lines after the config: ``stop``. End of input means the parent is gone: stop too."""
    for line in sys.stdin:
        if line.strip() == protocol.STOP:
            stop.set()
    stop.set()


def main() -> int:
    origin, session_pid = time.perf_counter(), os.getppid()
    out = sys.stdout
    first = sys.stdin.readline()
    try:
        run = protocol.read_request(first)
        origin = run.clock_origin if run.clock_origin is not None else origin
        config = ExperimentConfig.from_dict(run.config)
        resolved = ResolvedRun.from_dict(run.resolved) if run.resolved is not None else resolve(config)
        links = None
        if config.nodes:  # the devices the nodes have, as they say when connected
            from engine.nodes.coordinator import connect_run_nodes
            links, devices = connect_run_nodes(config)
            resolved = resolved.with_devices(devices)
    except (ConfigError, DeviceError, TypeError, ValueError, ConnectionError) as exc:   # codec.WireError: a ValueError
        message = (str(exc) if isinstance(exc, (ConnectionError, DeviceError)) else
                   f"invalid config: {exc}")
        out.write(protocol.encode(Errored(t=time.perf_counter() - origin, message=message)) + "\n"
                  + protocol.encode(Finished(t=time.perf_counter() - origin, status="failed")) + "\n")
        out.flush()
        return 2
    worker = Worker(config, resolved, origin, out, links=links, telemetry_hz=run.telemetry_hz,
                    run_id=run.run_id)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop_event.set())
    threading.Thread(target=_watch_stdin, args=(worker.stop_event,), name="stdin-watch", daemon=True).start()
    try:
        return worker.run()
    finally:
        worker.out.write_all()   # steps held when the loop raised
        worker.end_ranks()
        clean_up(worker.local, session_pid)


if __name__ == "__main__":
    sys.exit(main())
