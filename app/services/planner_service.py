"""The planner process: full validation and per-block profiling, off the app's process.

Run as ``python -m app.services.planner_service``. It imports torch, which the app must not
do: importing torch in a thread of the GUI process holds the GIL for hundreds of
milliseconds at a time, so the window would freeze. Here it costs nothing to the
UI. No Qt in this module.

Protocol, JSON Lines both ways:

- in:  ``{"id": n, "config": {...}, "profile": bool, "stages": int|None}``; only the newest pending
  request is served, older ones are skipped. EOF (the app closed or died) ends
  the process.
- out: the typed answers of engine/wire/planner.py, one JSON line each: ``Ready`` once torch is
  imported; then per request ``Checked`` (its problems, warnings, stages and block names) and, when asked
  to profile and the config is valid, ``Profiled``: the blocks as timed on the first device's kind, and
  each block's time on every kind of device the config names (the app balances each stage with its own
  device's times). While it profiles, ``Profiling`` at most every PROGRESS_EVERY_S (a heavy model's
  blocks take seconds); a newer request arriving meanwhile ends that profile (``Profiled`` with
  ``superseded``) and is served at once: the user moved on. A request it cannot read is said on stderr.
"""
from __future__ import annotations

import queue
import sys
import threading
import time
import traceback

from engine.wire.codec import WireError
from engine.wire.planner import Answer, Checked, Profiled, Profiling, Ready, encode, read_request

# Problems that make the model itself unbuildable: no profile then.
PROFILE_BLOCKERS = {"model", "model_file", "width", "depth", "batch_size", "config"}
PROGRESS_EVERY_S = 0.25
# The options building the model reads: their problems are checked even where others stop the check first.
MODEL_OPTIONS = {"model", "model_file", "width", "depth", "image_size", "split_level"}


class Superseded(Exception):
    """A newer request came while a profile ran: that profile is of no use any more."""


def _emit(answer: Answer) -> None:
    sys.stdout.write(encode(answer) + "\n")
    sys.stdout.flush()


def _read_stdin(lines: queue.Queue[str | None]) -> None:
    for line in sys.stdin:
        lines.put(line)
    lines.put(None)  # EOF: the app is gone


def _newest(lines: queue.Queue[str | None], first: str | None) -> tuple[str | None, bool]:
    """The newest pending request (older ones are stale) and whether EOF came."""
    newest, eof = first, first is None
    while True:
        try:
            line = lines.get_nowait()
        except queue.Empty:
            return newest, eof
        if line is None:
            eof = True
        elif line.strip():
            newest = line
    

def check(req_id: int, config_dict: dict) -> Checked:
    from engine.config import ConfigError, ExperimentConfig, Problem
    try:
        config = ExperimentConfig.from_dict(config_dict)
    except ConfigError as exc:
        return Checked(req_id, problems=list(exc.problems))
    try:
        from engine.run import validate
        plan, problems = validate.plan(config)
    except Exception as exc:  # validation itself broke: say so rather than pass the config
        problems = [Problem("config", f"validation failed: {type(exc).__name__}: {exc}")]
        plan = None
    if plan is None:
        return Checked(req_id, problems=list(problems) + model_problems(config, problems))
    return Checked(req_id, problems=list(problems), warnings=list(plan.warnings), stages=len(plan.devices),
                   n_blocks=plan.n_blocks, block_names=list(plan.block_names))


def model_problems(config, found: list) -> list:
    """What building the model alone says where other problems (``found``) stopped the check before it: a model
    file's SyntaxError showed only once the batch size was mended, and meanwhile the file seemed to load. The model
    is checked as a single device's run of it, so that only its own options can be at fault."""
    from engine.config import ExperimentConfig
    from engine.run import validate
    from engine.strategies import STRATEGIES
    strategy = STRATEGIES.get(config.strategy)
    if strategy is None or not strategy.builds_model or any(p.option in MODEL_OPTIONS for p in found):
        return []
    alone = ExperimentConfig(strategy="single", devices="cpu:1", model=config.model, model_file=config.model_file,
                             width=config.width, depth=config.depth, image_size=config.image_size,
                             split_level=config.split_level, seed=config.seed, dtype=config.dtype)
    try:
        _plan, problems = validate.plan(alone)
    except Exception:  # the check above said what it could; this one adds to it or says nothing
        return []
    return [p for p in problems if p.option in MODEL_OPTIONS]


def profile(req_id: int, config_dict: dict, progress=None) -> Profiled:
    import torch

    from engine.config import ExperimentConfig
    from engine.devices import DeviceError
    from engine.models.build import build
    from engine.planner import planning
    from engine.rules import effective_batch_size
    from engine.run.resolved_run import run_devices
    torch.set_num_threads(1)  # as on one CPU virtual device: one intra-op thread
    config = ExperimentConfig.from_dict(config_dict)
    spec = build(config)
    try:
        devices = run_devices(config.replace(nodes=None))   # timed here: this machine's devices of the spec
    except DeviceError:  # shown as a problem by the check; the blocks are worth seeing meanwhile
        devices = []
    timed = planning.time_blocks_per_kind(spec, effective_batch_size(config), devices, progress)
    first = devices[0].kind if devices else "cpu"
    return Profiled(req_id, blocks=list(timed[first]),
                    costs_by_kind={kind: [b.cost_s for b in infos] for kind, infos in timed.items()})


def _progress(req_id: int, lines: queue.Queue[str | None]):
    """The profile's progress callback: says how far it is now and then, and stops it when a newer request
    waits (it raises Superseded)."""
    said = [time.monotonic()]

    def report(fraction: float) -> None:
        if not lines.empty():
            raise Superseded
        if time.monotonic() - said[0] >= PROGRESS_EVERY_S:
            said[0] = time.monotonic()
            _emit(Profiling(req_id, round(fraction, 3)))
    return report


def main() -> int:
    import torch  # noqa: F401  the slow import, once, before saying ready
    _emit(Ready())
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read_stdin, args=(lines,), name="planner-stdin", daemon=True).start()
    while True:
        line, eof = _newest(lines, lines.get())
        if line is None:
            return 0
        try:
            request = read_request(line)
        except WireError as exc:
            sys.stderr.write(f"planner: a request it cannot read ({exc.detail}): {line[:200]!r}\n")
            continue
        req_id, config = request.id, request.config
        result = check(req_id, config)
        _emit(result)
        blocking = {p.option for p in result.problems} & PROFILE_BLOCKERS
        if request.profile and not blocking:
            if not lines.empty():  # a newer request is waiting: this profile would be stale
                continue
            try:
                # Blocks do not depend on the split: profile even while it is wrong.
                _emit(profile(req_id, dict(config, split=None), _progress(req_id, lines)))
            except Superseded:
                _emit(Profiled(req_id, superseded=True))
            except Exception as exc:
                _emit(Profiled(req_id, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()))
        if eof:
            return 0


if __name__ == "__main__":
    sys.exit(main())
