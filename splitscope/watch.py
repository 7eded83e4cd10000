"""What torch's hooks cannot know about a watched script's step, said by the script itself; a no-op when the
script is not watched (``python main.py watch -- SCRIPT.py``), and importable without Qt or torch.

    from splitscope import watch

    for batch in loader:
        with watch.phase("data"):                 # time this block as the step's data
            inputs, targets = prepare(batch)
        loss = step(inputs, targets)
        watch.step(samples=len(batch["ids"]), loss=loss.item())   # where the hooks would count otherwise

The watch counts a step's samples from the first dimension of the first tensor its outermost module call
gets, and its loss from the scalar given to backward (engine/watch/instruments.py); ``step`` overrides
either for the step under way. ``phase`` times a block as ``data`` or ``transfer`` (``KINDS``: forward,
backward, communication and the optimizer the hooks time already); a script that times its own ``data``
replaces the watch's guess (the time from a step's end to its first forward).
"""
from __future__ import annotations

import contextlib
import sys

KINDS = ("data", "transfer")   # what the hooks cannot see; the others they time themselves (a second would double)
# Where a watched rank's bootstrap (engine/watch/bootstrap.py) puts the instruments that time its steps, before the
# script's first line. Read from sys.modules, not imported: a script that is not watched loads nothing of the engine.
_CURRENT = "engine.watch.current"


def _instruments():
    """The instruments, or None: not watched, and every call here does nothing."""
    current = sys.modules.get(_CURRENT)
    return getattr(current, "instruments", None)


def watched() -> bool:
    """Whether this process is a rank of a watch."""
    return _instruments() is not None


def step(samples: int | None = None, loss: float | None = None) -> None:
    """The step under way has ``samples`` samples and this ``loss`` (either may be left out)."""
    if samples is not None and (not isinstance(samples, int) or samples < 0):
        raise ValueError(f"watch.step: samples must be a whole number of at least 0, got {samples!r}")
    instruments = _instruments()
    if instruments is not None:
        instruments.declare(samples=samples, loss=None if loss is None else float(loss))


@contextlib.contextmanager
def phase(kind: str):
    """Time the block as ``kind`` on this device's timeline (one of ``KINDS``)."""
    if kind not in KINDS:
        raise ValueError(f"watch.phase: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    instruments = _instruments()
    if instruments is None:
        yield
        return
    start = instruments.now()   # the watch's clock: on a GPU, when the GPU gets there (its idle while the host works)
    try:
        yield
    finally:
        instruments.declare_phase(kind, start, instruments.now())
