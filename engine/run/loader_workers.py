"""DataLoader workers on the cores no device holds, dying with their rank: a watched script's (the cores
engine/watch/bootstrap.py chooses) and the engine's own loader's (engine/run/loader.py). Each worker does both
before any worker_init_fn of the script's runs. Its own module, not the bootstrap's ``__main__``: a loader whose
workers spawn pickles the worker_init_fn by its module's name."""
from __future__ import annotations

import functools
import os


class OnCores:
    """A DataLoader's worker_init_fn: the worker dies with its rank (torch's own check of its parent comes
    every few seconds, after the run has ended) and moves to ``cores`` (None: stays where it is), then the
    script's own runs."""

    def __init__(self, cores: set[int] | None, theirs, rank_pid: int | None = None):
        self.cores, self.theirs = cores, theirs
        # The process that iterates the loader, where known (the engine's own): a worker whose rank died
        # before it could ask to die with it ends at once. A script's loader may be built in one process and
        # iterated in another: its workers' parent is not known ahead.
        self.rank_pid = rank_pid

    def __call__(self, worker_id: int) -> None:
        from engine.parent_death import die_with_parent
        die_with_parent(expected_parent=self.rank_pid)
        if self.cores:
            os.sched_setaffinity(0, self.cores)
        if self.theirs is not None:
            self.theirs(worker_id)


def place_loader_workers(cores: set[int] | None) -> None:
    """Every DataLoader built from now on starts its workers on ``cores`` (None: their rank's), dying with it."""
    from torch.utils.data import DataLoader
    original_init = DataLoader.__init__

    @functools.wraps(original_init)
    def init(loader, *args, **kwargs):
        original_init(loader, *args, **kwargs)
        loader.worker_init_fn = OnCores(cores, loader.worker_init_fn)
    DataLoader.__init__ = init
