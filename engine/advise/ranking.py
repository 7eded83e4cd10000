"""Probe once, enumerate, predict and rank: the part of ``main.py advise`` that imports torch, run in a child process
(``python -m engine.advise.ranking``, forked by the fork server as a run's validation is: engine/run/validate.py),
so that the command line's process, which then supervises the checking runs, never holds torch.

The child builds the model, measures the devices' communication (engine/advise/link_probe.py: first, before any
computation, since it forks a process per device), probes the model on the first device
(engine/advise/model_probe.py), enumerates the candidates the strategies accept (engine/advise/candidates.py),
predicts each (engine/advise/predict.py) and answers with them ranked: those that fit the memory limit first,
fastest predicted first. Its request on stdin: {"config": ExperimentConfig, "memory_limit": bytes or null
("auto")}; its answer on stdout: a ``Ranking`` as JSON (problems instead where the model cannot be built).
"""
from __future__ import annotations

import os
import subprocess
import sys

from engine import devices as devices_mod, forkserver
from engine.advise.results import Ranking
from engine.config import ExperimentConfig
from engine.environment import ROOT, with_project_path
from engine.rules import MOST_HANG_TIMEOUT_S, effective_batch_size
from engine.wire import codec
from engine.wire.children import RankingRequest

PROBE_ALLOWANCE_S = 300.0   # the probes and predictions of a large model on a busy machine, beside its build


def rank_in_child(config: ExperimentConfig, memory_limit: int | None) -> Ranking:
    """The child's ranking, or a Ranking whose problems say why there is none."""
    request = codec.dumps(RankingRequest(config.to_dict(), memory_limit))
    # One intra-op thread, as a CPU virtual device's rank has; gloo on loopback, as a run's ranks on this machine.
    env = with_project_path(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    limit = min(config.hang_timeout_s, MOST_HANG_TIMEOUT_S) + PROBE_ALLOWANCE_S
    try:
        done = forkserver.run_module("engine.advise.ranking", input=request, env=env, cwd=ROOT, timeout=limit)
    except subprocess.TimeoutExpired:
        return Ranking(problems=[f"the model's probe did not finish within {limit:g} s; it was ended"])
    try:
        answer = codec.read(Ranking, done.stdout, "advise's probe child")
    except codec.WireError:
        answer = None
    if answer is None:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Ranking(problems=[f"the model's probe failed: {why}"])
    return answer


def rank(config: ExperimentConfig, memory_limit: int | None) -> Ranking:
    """In the child: every accepted candidate predicted and ranked."""
    import torch

    from engine.advise import candidates as space
    from engine.advise.link_probe import probe_links
    from engine.advise.model_probe import probe_model
    from engine.advise.predict import predict
    from engine.advise.results import Ranked
    devices = devices_mod.parse(config.devices, 2)
    torch.set_num_threads(1)
    spec, problem = _built(config)
    if problem is not None:
        return Ranking(problems=[str(problem)])
    params = sum(p.numel() * p.element_size() for p in spec.whole().parameters())
    link = probe_links(devices, params, params) if len(devices) > 1 else None
    first = devices[0]
    if first.kind == "cpu" and first.core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {first.core})   # timed as its rank would run: on the device's core
    model = probe_model(spec, config, first.torch_device, len(devices))
    if memory_limit is None:
        memory_limit, source = auto_memory_limit(devices)
    else:
        source = "--memory-limit"
    batch = effective_batch_size(config)

    def costs(samples: float) -> list[float]:
        return [b.forward_s(samples) + b.backward_s(samples) for b in model.blocks]

    # Each candidate's devices as parsed above: parsed again now, on the core this process was pinned to, CPU
    # devices would all be on that one.
    own = {space.device_spec(devices): devices, space.device_spec(devices[:1]): devices[:1]}

    def devices_of(spec_text: str) -> list:
        return own[spec_text]
    found = space.accepted(space.enumerate_candidates(devices, len(model.blocks), batch, costs), config, spec,
                           devices_of)
    ranked = [Ranked(c, predict(c, devices_of(c.devices), model, link, batch, memory_limit)) for c in found]
    ranked.sort(key=lambda r: (not r.prediction.fits, r.prediction.step_s))
    return Ranking(ranked, model, link, memory_limit, source, batch)


def auto_memory_limit(devices) -> tuple[int, str]:
    """What "auto" allows each device, and how it was found: a GPU's free memory (the least of the devices'); on
    CPU devices, this machine's available memory shared among them, less what torch itself takes in each rank's
    process (``engine.devices.RANK_MEMORY``)."""
    if devices[0].kind == "cuda":
        import torch
        free = min(torch.cuda.mem_get_info(d.index)[0] for d in devices)
        return free, f"auto: the free memory of the emptiest GPU, {free / 2**30:.3g} GiB"
    import psutil
    available = psutil.virtual_memory().available
    share = max(0, available // len(devices) - devices_mod.RANK_MEMORY)
    return share, (f"auto: this machine's available memory ({available / 2**30:.3g} GiB) shared by {len(devices)} "
                   f"device(s), less {devices_mod.RANK_MEMORY >> 20} MiB a process for torch")


def _built(config: ExperimentConfig):
    """(the model's spec, None), or (None, the problem building it)."""
    from engine.models.build import build
    from engine.run.validate import built_or_problem
    return built_or_problem(config, lambda: build(config))


def _serve() -> int:
    """The child: a model file may print; what it prints goes to stderr, the answer alone to stdout."""
    answer_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    request = codec.read(RankingRequest, sys.stdin.read(), "advise's probe child")
    ranking = rank(ExperimentConfig.from_dict(request.config), request.memory_limit)
    answer_out.write(codec.dumps(ranking))
    answer_out.close()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
