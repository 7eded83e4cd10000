"""A watched rank: ``python -m engine.watch.bootstrap SCRIPT [ARGS...]``, started by engine/watch/launcher.py.

torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) come from the
launcher; so do its pid (SPLITSCOPE_WATCH_PARENT: the rank dies with it), the rank's device (SPLITSCOPE_WATCH_DEVICE), its core (SPLITSCOPE_WATCH_CORE:
pinned as the engine pins its own ranks), the steps to watch (SPLITSCOPE_WATCH_STEPS; none: until
the script ends), the cores its DataLoader workers may use (SPLITSCOPE_WATCH_LOADER_CORES: the
machine's cores no device holds; a worker would otherwise inherit its rank's one core and take
turns with it), whether to instrument at all (SPLITSCOPE_WATCH_INSTRUMENTS="0": the same
process, untimed, to compare with) and the pipe for its events (SPLITSCOPE_EVENT_FD: the engine's
rank events, engine/record/rank_events.py, one JSON line each). The script runs as ``__main__``
with its own arguments, and imports nothing of ours.
"""
from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback

from engine.environment import variable
from engine.parent_death import die_with_parent
from engine.record.rank_events import Done, Failed, RankEvent, Ready, encode

STOPPED_BY_US = -1   # main's answer when --steps ended the script


def main() -> int:
    parent = variable("SPLITSCOPE_WATCH_PARENT")
    die_with_parent(int(parent) if parent else None)   # a launcher gone before this line: gone now too
    out = os.fdopen(int(variable("SPLITSCOPE_EVENT_FD")), "w", buffering=1, encoding="utf-8")

    def emit(event: RankEvent) -> None:
        out.write(json.dumps({**encode(event), "time": time.perf_counter()}, separators=(",", ":")) + "\n")
    core = variable("SPLITSCOPE_WATCH_CORE")
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(core)})
    script, args = sys.argv[1], sys.argv[2:]
    steps = variable("SPLITSCOPE_WATCH_STEPS")
    from engine.watch.instruments import Instruments, WatchEnded
    instruments = Instruments(variable("SPLITSCOPE_WATCH_DEVICE", "cpu:0"), emit, int(steps) if steps else None)
    emit(Ready(os.getpid()))
    loader_cores = variable("SPLITSCOPE_WATCH_LOADER_CORES")
    if loader_cores:
        from engine.watch.loader_cores import place_loader_workers
        place_loader_workers({int(c) for c in loader_cores.split(",")})
    if variable("SPLITSCOPE_WATCH_INSTRUMENTS", "1") != "0":
        instruments.install()
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))   # as `python SCRIPT` puts the script's folder
    try:
        runpy.run_path(script, run_name="__main__")
    except WatchEnded:
        emit(Done())
        return STOPPED_BY_US   # the steps asked for are watched: the script is stopped there
    except SystemExit as exc:
        if exc.code not in (None, 0):
            emit(Failed(f"the script exited with status {exc.code}", traceback.format_exc()))
            return 1
    except BaseException as exc:  # the script's own error: reported with its traceback
        emit(Failed(f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        return 1
    emit(Done())
    return 0


if __name__ == "__main__":
    code = main()
    if code == STOPPED_BY_US:
        # Stopped mid-training: its process group would wait on peers at teardown, so no teardown (as Ctrl+C
        # would end it); every event is written (the channel is line-buffered).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    sys.exit(code)   # it ended by itself: a normal exit, as unwatched (its atexit handlers run, files flush)
