"""A watched rank: the process engine/run/local_ranks.py starts for ``--strategy script`` in place of
engine/run/rank.py (``Script.rank_module``), with the same environment.

torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT on loopback) come
from the worker, or from torchrun itself under a node agent (engine/nodes/node_run.py, which writes the
script that travelled with the run into the run's folder); the run's config (SPLITSCOPE_CONFIG: the script, its arguments and folder, the
most steps to watch) and devices (SPLITSCOPE_DEVICES) as every rank gets them. The rank pins itself
to its device's core as engine/run/rank.py does, sends DataLoader workers to the cores no device
holds (a worker would otherwise inherit its rank's one core and take turns with it), installs the
instruments (engine/watch/instruments.py) and runs the script as ``__main__`` with its own
arguments, in its folder; the script imports nothing of ours (splitscope/watch.py, if it does, reaches
the instruments, engine/watch/current.py). Its steps go to the worker as the engine's rank events (Ready, StepReport per
training step, Done, or Failed with the script's traceback) on SPLITSCOPE_EVENT_FD, or on a node
the agent's socket (SPLITSCOPE_EVENT_SOCKET).
"""
from __future__ import annotations

import atexit
import gc
import os
import runpy
import shlex
import signal
import sys
import threading
import traceback
import warnings

from engine.config import ExperimentConfig
from engine.devices import Device, usable_cores
from engine.environment import RankEnvironment, variable
from engine.parent_death import become_subreaper
from engine.results import to_json
from engine.run import heartbeat as phases
from engine.run.loader_placement import held_cores
from engine.run.rank import (
    EventChannel,
    check_node_rank,
    describe_exception,
    die_with_worker,
    node_channel,
    pin,
)
from engine.run.resolved_run import own_device
from engine.strategies.script import plain
from engine.wire.rank import Done, Failed, Ready, read_devices

STOPPED_BY_US = -1   # main's answer when the config's steps ended the script


def end_with_everything_started() -> None:
    """This rank and whatever the script starts (mp.spawn, a server, a loader's workers) are one process group,
    ended whole when the worker ends the rank (SIGTERM; its SIGKILL after the grace period leaves the loader's
    workers to their parent-death signal, engine/run/loader_workers.py), when the worker closes the rank's stdin
    or dies, and when the rank ends (what the script left running: a child it never waited for). A daemon the
    script starts in a session of its own (a double fork and setsid) leaves the group, but not this process's
    descendants: the rank is their subreaper, and they are ended with the group (``end_the_group``)."""
    try:
        os.setpgid(0, 0)
    except OSError:   # already a group's (or a session's) leader: its group is its own
        pass
    become_subreaper()

    def end_group(_signum, _frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        end_the_group(including_this=True)
    signal.signal(signal.SIGTERM, end_group)
    die_with_worker(end=lambda: end_the_group(including_this=True))
    atexit.register(end_the_group)   # registered first, so run last: after the script's own exit handlers
    # and before it, multiprocessing's (children joined, daemons ended, as any Python program's at its end): a rank
    # the fork server started lost it with the server's exit handlers (engine/forkserver/child.py); registered
    # twice in a fresh interpreter, it runs once (its own flag)
    import multiprocessing.util
    atexit.register(multiprocessing.util._exit_function)


def end_the_group(including_this: bool = False) -> None:
    """SIGKILL to the rank's process group (all but this process unless ``including_this``), where the group is
    the rank's own (never the worker's)."""
    group, me = os.getpgid(0), os.getpid()
    if group != me:
        if including_this:
            os._exit(3)
        return
    if including_this:
        os.killpg(group, signal.SIGKILL)
    if threading.current_thread() is threading.main_thread():
        # torch's DataLoader raises in the main thread when one of its workers dies (its SIGCHLD handler): the
        # workers die here on purpose
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    import psutil
    try:   # this process's descendants, daemons in sessions of their own included (it is their subreaper)
        descendants = {proc.pid: proc for proc in psutil.Process(me).children(recursive=True)}
    except psutil.Error:
        descendants = {}
    for proc in psutil.process_iter():
        try:
            if proc.pid != me and (proc.pid in descendants or os.getpgid(proc.pid) == group):
                proc.kill()
        except Exception:  # noqa: BLE001  (gone, or not ours to read: the rest are ended all the same)
            continue


def script_traceback(exc: BaseException) -> str:
    """The traceback as python would print it for the script: from the script's first frame on (this bootstrap's
    and runpy's frames, which python's own start does not show, left out)."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")
                              or tb.tb_frame.f_code.co_filename.endswith("runpy.py")):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb if tb is not None else exc.__traceback__))


def python_threads() -> int:
    """The intra-op threads torch starts with in a plain ``python SCRIPT.py`` (a process forked by the session's
    fork server starts with the ranks' one): OMP_NUM_THREADS where the user set it (engine/run/local_ranks.py
    plain_environment keeps theirs), else torch's default, the physical cores, of those this process may run on."""
    given = variable("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    import psutil
    allowed = len(usable_cores())
    physical = psutil.cpu_count(logical=False) or allowed
    logical = psutil.cpu_count(logical=True) or allowed
    return max(1, min(allowed, allowed * physical // logical))


def done(instruments, own: Device) -> Done:
    """The script ended (or its steps asked for are watched): what its steps need said, and its device's peak in
    the dtype it ran in (for MFU: engine/record/efficiency.py), which only its counted step could tell."""
    try:
        peaks = instruments.peaks()
    except Exception as exc:  # noqa: BLE001  (the run's figures stand without an MFU)
        print(f"splitscope: the peak FLOP/s of {own.name} was not measured: {exc}", file=sys.stderr)
        peaks = None
    try:
        facts, unformulated = to_json(instruments.reader.facts()), instruments.unformulated()
    except Exception as exc:  # noqa: BLE001  (the run's figures stand without what was read of the script)
        print(f"splitscope: what the script is was not read: {exc}", file=sys.stderr)
        facts = unformulated = None
    return Done(note=instruments.note(), peaks=peaks, script=facts, unformulated=unformulated)


def failed(instruments, channel: EventChannel, failure: Failed) -> None:
    """The script failed: its steps so far kept (a GPU's last ones waited for), then its error."""
    try:
        instruments.stop_counting()
        instruments.close_profiler()
        instruments.flush()
    except Exception:  # noqa: BLE001  (a GPU the error left unusable: those steps are lost, the error is not)
        pass
    channel.emit(failure)


def set_torch_threads(own: Device, world_size: int, as_python: bool) -> None:
    """Torch's intra-op threads: as many as a plain ``python SCRIPT.py`` starts with, or one where our own ranks
    have one. Torch is first imported here, once the heartbeat is in IMPORTING."""
    import torch
    if as_python:
        torch.set_num_threads(python_threads())
    elif own.kind == "cpu" or world_size > 1:   # one intra-op thread per CPU virtual device, as our own
        torch.set_num_threads(1)                # ranks; on GPUs as torchrun sets OMP_NUM_THREADS for several


def start_instruments(config: ExperimentConfig, env: RankEnvironment, own: Device, channel: EventChannel,
                      heartbeat: phases.Heartbeat, spare: list[int], as_python: bool):
    """The instruments, installed for the script to come (unless SPLITSCOPE_WATCH_INSTRUMENTS says otherwise), and
    the loader's workers sent to the ``spare`` cores."""
    from engine.run.loader_workers import place_loader_workers
    from engine.watch.instruments import Instruments
    # For bench/watch_bench.py only: "0" runs the script untimed, "silent" times it and reports no step (the
    # hooks' own cost, apart from recording the steps in the worker, the session and the store).
    mode = variable("SPLITSCOPE_WATCH_INSTRUMENTS", "1")
    timed = mode != "0"
    # Ready at the script's first training forward: its start-up (its imports, datasets, the rendezvous) is the
    # user's code, bounded by the hang timeout (engine/run/heartbeat.py START_UP: only ours has the allowance).
    def ready() -> None:
        channel.emit(Ready(os.getpid()))
        heartbeat.training()
    instruments = Instruments(own, channel.emit if mode != "silent" else (lambda _report: None),
                              config.steps or None, on_training=ready if timed else None, count_flops=mode == "1",
                              warmup=config.warmup)
    instruments.given_samples = config.samples_per_step
    if config.profile_steps and timed:
        from engine.measure.profiling import StepProfiler, first_profiled
        instruments.profiler = StepProfiler(config.profile_steps, first_profiled(config), own.kind == "cuda",
                                            env.rank)
    heartbeat.enter(phases.SCRIPT)
    if not timed:
        ready()
    if not as_python:
        place_loader_workers(set(spare) or None)
    if timed:
        instruments.install()
    # torch warns of any global module hook where a script compiles a module: ours are kept out of its graph
    warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
    from engine.watch import current  # what the script says of its steps (splitscope.watch) reaches them
    current.instruments = instruments
    return instruments


def run_script(config: ExperimentConfig) -> None:
    """The script as ``__main__``, with its arguments, from its folder, as python would run it."""
    script = config.script
    sys.argv = [script or config.script_module, *shlex.split(config.script_args or "")]
    if config.script_module:   # `python -m MODULE`: the current folder first on the path, argv[0] its file
        os.chdir(config.script_cwd or os.getcwd())
        sys.path.insert(0, os.getcwd())
        runpy.run_module(config.script_module, run_name="__main__", alter_sys=True)
    else:
        os.chdir(config.script_cwd or os.path.dirname(script))
        sys.path.insert(0, os.path.dirname(script))   # as `python SCRIPT` puts the script's folder first
        runpy.run_path(script, run_name="__main__")


def watch_script(config: ExperimentConfig, instruments, channel: EventChannel, own: Device) -> int:
    """Run the script and say how it ended (Done or Failed); main's answer."""
    from engine.watch.instruments import WatchEnded
    try:
        run_script(config)
    except WatchEnded:
        instruments.training()
        instruments.close_profiler()
        channel.emit(done(instruments, own))
        return STOPPED_BY_US   # the steps asked for are watched: the script is stopped there
    except SystemExit as exc:
        if exc.code not in (None, 0):
            # as python says it: a message exits with status 1 and prints it, a number prints nothing
            said = f"the script exited with status 1: {exc.code}" if isinstance(exc.code, str) else \
                f"the script exited with status {exc.code}"
            failed(instruments, channel, Failed(said, None))
            return 1
    except BaseException as exc:  # the script's own error: reported with its traceback
        failed(instruments, channel, Failed(describe_exception(exc), script_traceback(exc)))
        return 1
    instruments.training()   # a script that never ran a forward still says it ran
    try:
        instruments.finish()
    except WatchEnded:   # its last forward was the last step asked for: the script has ended anyway
        pass
    # What the script leaves in reference cycles (a DDP module, whose reducer holds the process group) is freed
    # now, while the interpreter is whole: freed at exit instead, gloo's worker threads can still be releasing a
    # finished all-reduce, which needs the interpreter's lock and aborts the process (SIGABRT, "terminate called
    # without an active exception"): 7 of 45 torchrun runs of a DDP script that left its module to the exit, on two
    # cores, none of 30 with this collection.
    gc.collect()
    channel.emit(done(instruments, own))
    return 0


def main() -> int:
    end_with_everything_started()
    env = RankEnvironment.read()
    channel = node_channel(env) if env.event_socket else EventChannel(env.event_fd)   # under a node agent: its socket
    try:
        check_node_rank(env)
    except RuntimeError as exc:
        channel.emit(Failed(str(exc), ""))
        return 1
    config = ExperimentConfig.from_json(env.config_json)
    heartbeat = phases.Heartbeat(channel.emit, config.hang_timeout_s)
    devices = read_devices(env.devices_json)
    own = own_device(devices, env.rank, env.world_size)
    as_python = plain(config)   # one plain process: every core, torch's own threads, the loader's workers as torch
    # the cores this process may use, before it is pinned to its own: the ones no device holds are the loader's
    spare = sorted(set(usable_cores()) - held_cores(devices, own.node))
    pin(own)
    heartbeat.enter(phases.IMPORTING)
    set_torch_threads(own, env.world_size, as_python)
    instruments = start_instruments(config, env, own, channel, heartbeat, spare, as_python)
    return watch_script(config, instruments, channel, own)


if __name__ == "__main__":
    code = main()
    if code == STOPPED_BY_US:
        # Stopped mid-training: its process group would wait on peers at teardown, so no teardown (as Ctrl+C
        # would end it); every event is written (the channel is line-buffered).
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            end_the_group()
        finally:
            os._exit(0)
    sys.exit(code)   # it ended by itself: a normal exit, as unwatched (its atexit handlers run, files flush)
