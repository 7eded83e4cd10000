"""A rank process: one process of a run (``python -m engine.run.rank``), launched by the worker.

torchrun-compatible: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from the
environment. The config and resolved devices come in SPLITSCOPE_CONFIG and
SPLITSCOPE_DEVICES; events go to the worker as JSON lines on the file descriptor
SPLITSCOPE_EVENT_FD (stdout stays free for whatever user code prints), or, under a
node agent's torchrun, to the agent's socket SPLITSCOPE_EVENT_SOCKET. The rank
ends itself when whoever started it goes away (stdin closes, or the parent-death signal:
from the worker, or from the fork server that forked it, engine/forkserver).
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from datetime import timedelta

from engine import strategies
from engine.cores import usable_cores
from engine.environment import RankEnvironment
from engine.parent_death import die_with_parent
from engine.rules import effective_batch_size, effective_micro_batches, effective_stages_per_device
from engine.run.heartbeat import BUILDING, IMPORTING, JOINING, PREPARING, Heartbeat
from engine.run.loader_placement import worker_cores
from engine.run.resolved_run import own_device, worked_devices
from engine.wire import codec
from engine.wire.nodes import StreamHello
from engine.wire.rank import Done, Failed, RankEvent, Ready, line as event_line, read_devices


def die_with_worker(end=lambda: os._exit(3)) -> None:
    """End (``end``: exit) when the worker closes the pipe it gave this process as stdin, or dies.

    The pipe moves off descriptor 0 first, and 0 reads /dev/null: a user's code that reads its input (a watched
    script's ``input()``, a model file's) gets end-of-file at once, as it would with no terminal, instead of
    waiting for ever on a pipe nobody writes."""
    die_with_parent()  # SIGKILL when the worker (or torchrun) dies, even by SIGKILL
    lifeline = os.dup(0)   # not inherited: a child of the script holds no end of it
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    def watch_lifeline():
        # The raw descriptor, not a file object: a thread blocked in a buffered read holds the buffer's lock, and a
        # process forked meanwhile (a DataLoader's worker) would wait on it forever.
        try:
            while os.read(lifeline, 1024):
                pass
        except OSError:
            pass
        end()  # the worker closed the pipe or died
    threading.Thread(target=watch_lifeline, name="parent-watch", daemon=True).start()


def collective_timeout(hang_timeout_s: float) -> timedelta:
    """The process group's own timeout: longer than the worker's hang timeout, so that the worker's watchdog names
    the rank that stopped (engine/run/failure.py hung_rank) before a healthy peer's collective times out and
    reads as the failure."""
    return timedelta(seconds=hang_timeout_s + max(30.0, hang_timeout_s))


class EventChannel:
    def __init__(self, fd: int):
        self._file = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
        self._lock = threading.Lock()

    def emit(self, event: RankEvent) -> None:
        line = event_line(event, time.perf_counter())
        with self._lock:
            self._file.write(line + "\n")


def node_channel(env: RankEnvironment) -> EventChannel:
    """Under a node agent (torchrun passes no pipe): the events, stdout and stderr each on a connection to the
    agent's socket, each opened by a line naming the rank and the stream (engine.nodes.node_run)."""
    import socket

    def connect(stream: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(env.event_socket)
        sock.sendall((codec.dumps(StreamHello(env.rank, env.local_rank, os.getpid(), stream)) + "\n").encode())
        return sock
    events = connect("events")
    for fd, stream in ((1, "stdout"), (2, "stderr")):
        sock = connect(stream)
        os.dup2(sock.fileno(), fd)
        sock.close()
    return EventChannel(events.detach())


def check_node_rank(env: RankEnvironment) -> None:
    """Under a node agent: RuntimeError unless torchrun numbered this node as Splitscope did (its devices, its
    events' node, are that number's)."""
    expected, given = env.node_rank, env.group_rank
    if expected is not None and given is not None and expected != given:
        raise RuntimeError(f"torchrun numbered this node {given}, Splitscope expected {expected}: the nodes' ranks "
                           "follow their addresses' order (engine/nodes/address.py)")


def node_store(timeout, env: RankEnvironment):
    """The process group's store on a node: the run's keys in the c10d rendezvous store that the rendezvous
    node's torchrun hosts on its agent's address alone (engine.nodes.torchrun), rather than a store of rank
    0's own, which torch would open on every interface."""
    import torch.distributed as dist

    from engine.nodes.address import parse_address
    check_node_rank(env)
    address = parse_address(env.store_addr, default_port=None)
    store = dist.TCPStore(address.host, address.port, is_master=False, timeout=timeout, wait_for_workers=False)
    return dist.PrefixStore(env.store_prefix, store)


def pin(device) -> None:
    """One pinned core and one intra-op thread per CPU virtual device."""
    if device.kind == "cpu" and device.core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {device.core})


def main() -> int:
    die_with_worker()
    env = RankEnvironment.read()
    channel = node_channel(env) if env.event_socket else EventChannel(env.event_fd)
    rank, world = env.rank, env.world_size
    try:
        from engine.config import ExperimentConfig
        config = ExperimentConfig.from_json(env.config_json)
        heartbeat = Heartbeat(channel.emit, config.hang_timeout_s)
        devices = read_devices(env.devices_json)
        own = own_device(devices, rank, world)
        loader_cores = worker_cores(config, devices, usable_cores(), own.node)   # before this process is pinned
        pin(own)
        heartbeat.enter(IMPORTING)
        import torch
        torch.set_num_threads(1)
        import torch.distributed as dist
        needs_group = world > 1 or strategies.get(config.strategy).needs_process_group
        if own.kind == "cuda":
            # Also without a process group: a one-process run on cuda:1 must not make
            # its CUDA context (and its default-device work) on GPU 0.
            torch.cuda.set_device(own.index)
        if needs_group:
            backend = "nccl" if own.kind == "cuda" else "gloo"
            timeout = collective_timeout(config.hang_timeout_s)
            heartbeat.enter(JOINING)
            store_file = env.store_file
            if env.store_addr:  # started by torchrun under a node agent
                dist.init_process_group(backend, store=node_store(timeout, env), rank=rank, world_size=world,
                                        timeout=timeout)
            elif store_file:
                # Rendezvous through a file: torch's TCPStore would listen on every interface.
                dist.init_process_group(backend, store=dist.FileStore(store_file, world), rank=rank,
                                        world_size=world, timeout=timeout)
            else:  # launched by torchrun or similar: MASTER_ADDR/MASTER_PORT from the environment
                dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
        heartbeat.enter(BUILDING)
        run_rank(config, devices, rank, world, channel, own, loader_cores, heartbeat)
        if needs_group:
            dist.destroy_process_group()
        return 0
    except BaseException as exc:  # report anything, then exit non-zero
        channel.emit(Failed(describe_exception(exc), traceback.format_exc()))
        return 1


def describe_exception(exc: BaseException) -> str:
    """The root cause first: torch's pipelining wraps a model's error in a RuntimeError of its own."""
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    # str() of a KeyError is its key's repr ('can\'t ...'): the message itself reads better.
    message = root.args[0] if isinstance(root, KeyError) and len(root.args) == 1 and isinstance(root.args[0], str) \
        else str(root)
    text = f"{type(root).__name__}: {message}"
    if root is not exc:
        context = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        text += f" (in: {context})"
    if isinstance(root, MemoryError) or "out of memory" in str(root).lower():
        return (f"out of memory ({text}); reduce --batch-size, use more --micro-batches, "
                "or spread the model over more devices")
    return text


def run_rank(config, devices, rank, world, channel, own, loader_cores=(), heartbeat=None) -> None:
    """Build and train this rank's part; ``own`` is the device the process is pinned to (``own_device``),
    ``loader_cores`` where its DataLoader's workers run (engine.run.loader_placement)."""
    from engine.measure.flops import DeviceFlops
    from engine.measure.timing import StepTimer
    from engine.models.build import build
    from engine.run import loop
    from engine.strategies.base import ParameterChange, RankContext
    spec = build(config)
    if heartbeat is not None:   # the user's code has returned: what follows up to the first step is ours
        heartbeat.enter(PREPARING)
    split = resolve_split(config, spec, devices, rank, world)
    # The GPUs this process works on: its own, or every listed one when it is alone.
    mine = worked_devices(devices, rank, world)
    ctx = RankContext(config=config, rank=rank, world_size=world, devices=devices, split=split,
                      spec=spec, timer=StepTimer(cuda_indices=sorted({d.index for d in mine if d.kind == "cuda"})))
    executor = strategies.get(config.strategy).build(ctx)
    change = ParameterChange(executor)
    channel.emit(Ready(os.getpid(), list(split) if split else None, spec.has_batch_norm,
                       executor.schedule_plan() if rank == 0 else None,
                       peaks=device_peaks(mine, config.dtype, spec.whole())))
    if heartbeat is not None:
        heartbeat.training()
    flops = DeviceFlops(own.name, {d.index: d.name for d in mine if d.kind == "cuda"})
    try:
        # A batch drawn inside the step is drawn on the CPU device's core; a loader's wait idles any device.
        waits = own.kind == "cpu" or config.input_prep == "loader"
        loop.train(ctx, executor, channel.emit, data_device=own if waits else None, loader_cores=loader_cores,
                   flops=flops)
        param_sq, change_sq = executor.param_sq(), change.sq()   # before the probe's backwards touch anything
        cost, why_not = executor.split_backward_extra_s()
        two_way, two_way_problem = executor.two_way_extra_s()   # after it: every rank past that probe
        channel.emit(Done(param_sq, change_sq, cost.extra_s if cost else None, why_not,
                          split_backward_fixed_s=cost.fixed_s if cost else None, two_way_extra_s=two_way,
                          two_way_problem=two_way_problem))
    finally:
        executor.close()


def device_peaks(mine, dtype: str, module) -> dict[str, dict]:
    """Each of this process's devices' peak FLOP/s in ``dtype``, measured (cached once a machine: on the first
    run, a few tenths of a second on this process's core or GPU) and, for a known GPU, the datasheet's; a
    float32 run's on a GPU are TF32's where ``module``'s work runs on TF32 tensor cores
    (engine.measure.peak.run_tf32)."""
    import dataclasses

    import torch

    from engine.measure.peak import datasheet_peak, measured_peak, run_tf32
    from engine.results.efficiency import DevicePeaks
    peaks = {}
    tf32 = run_tf32(dtype, module) if any(d.kind == "cuda" for d in mine) else False
    for device in mine:
        if device.kind == "cuda":
            with torch.cuda.device(device.index):
                measured = measured_peak(device, dtype, tf32)
            datasheet = datasheet_peak(torch.cuda.get_device_name(device.index), dtype, tf32=tf32)
        else:
            measured, datasheet = measured_peak(device, dtype), None
        peaks[device.name] = dataclasses.asdict(DevicePeaks(measured, datasheet))
    return peaks


def unpinned_cpu_peaks(device, dtype: str, module) -> dict[str, dict]:
    """An unpinned CPU device's peak (a plain script's, engine/strategies/script.py): one core's, measured on one
    thread as a pinned device's is (and cached alike), times the threads torch runs its work on."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        peaks = device_peaks([device], dtype, module)
    finally:
        torch.set_num_threads(threads)
    for entry in peaks.values():
        measured = entry.get("measured")
        if measured:
            measured["flops_per_s"] *= threads
            one_core = measured["source"].removeprefix("measured: ")
            measured["source"] = f"measured: {threads} threads x one core's {one_core}"
    return peaks


def resolve_split(config, spec, devices, rank, world):
    """The config's split, or the balanced one from rank 0's per-block timing, shared with every rank."""
    if not strategies.get(config.strategy).uses_split:
        return None
    if config.split is not None:
        return tuple(config.split)
    split = None
    if rank == 0:
        from engine.planner.planning import plan_balanced
        from engine.strategies.pipeline.staged import stage_devices
        micro = max(1, effective_batch_size(config) // effective_micro_batches(config))
        split = plan_balanced(spec, micro, stage_devices(config, devices, effective_stages_per_device(config)))[1]
    if world > 1:
        import torch.distributed as dist
        box = [split]
        dist.broadcast_object_list(box, src=0)
        split = box[0]
    return tuple(split)


if __name__ == "__main__":
    code = main()
    # Every event is written and flushed (line-buffered channel); skip the interpreter's slow
    # teardown of torch, which would keep the worker, and the user, waiting about a second.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
