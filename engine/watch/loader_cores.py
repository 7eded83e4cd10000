"""A watched script's DataLoader workers on the cores no device holds (engine/watch/bootstrap.py chooses them):
each worker moves there before the script's own worker_init_fn runs. Its own module, not the bootstrap's
``__main__``: a loader whose workers spawn pickles the worker_init_fn by its module's name."""
from __future__ import annotations

import functools
import os


class OnCores:
    """A DataLoader's worker_init_fn: the worker moves to ``cores``, then the script's own runs."""

    def __init__(self, cores: set[int], theirs):
        self.cores, self.theirs = cores, theirs

    def __call__(self, worker_id: int) -> None:
        os.sched_setaffinity(0, self.cores)
        if self.theirs is not None:
            self.theirs(worker_id)


def place_loader_workers(cores: set[int]) -> None:
    """Every DataLoader built from now on starts its workers on ``cores``."""
    from torch.utils.data import DataLoader
    original_init = DataLoader.__init__

    @functools.wraps(original_init)
    def init(loader, *args, **kwargs):
        original_init(loader, *args, **kwargs)
        loader.worker_init_fn = OnCores(cores, loader.worker_init_fn)
    DataLoader.__init__ = init
