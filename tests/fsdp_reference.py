"""One rank of torch's own FSDPMemTracker reading of an fsdp step, for tests/test_fsdp_memory.py.

``python fsdp_reference.py RANK WORLD PORT WIDTH DEPTH BATCH``: the mlp the engine
builds, sharded as engine/strategies/sharded_executor.py shards it (each block, then
the root) over a gloo group on loopback, its rank's chunk of one batch, AdamW; one
step untracked (the optimizer's state exists from then on), then one inside the
tracker, the whole batch tracked as its input. Prints this rank's bytes by torch's kinds as JSON: "forward" after the loss,
"backward" after it, "step" after the optimizer, "peak" the step's peak.
"""
from __future__ import annotations

import gc
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from engine.config import ExperimentConfig
from engine.models.build import build
from engine.strategies.base import replica_batch, replica_loss
from engine.strategies.fsdp_peak import _fsdp_mem_tracker

# torch's own class, loaded as the engine loads it: without its package's __init__, which imports inductor, dynamo
# and triton (3.3 s a rank; tests/test_fsdp_memory.py checks it is the same class).
FSDPMemTracker = _fsdp_mem_tracker()


def main(rank: int, world: int, port: int, width: int, depth: int, batch: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    spec = build(ExperimentConfig(model="mlp", width=width, depth=depth, batch_size=batch, strategy="fsdp",
                                  devices=f"cpu:{world}"))
    model = spec.whole()
    mesh = init_device_mesh("cpu", (world,))
    for _, block in spec.blocks:
        if any(True for _ in block.parameters()):
            fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters())
    inputs, targets = spec.data.sample(batch)

    def step(snap=None):
        x, y, _ = replica_batch(inputs, targets, world, rank)
        optimizer.zero_grad(set_to_none=True)
        local, scaled = replica_loss(spec.loss_fn, model(x), y, batch, world)
        forward = snap and snap()
        scaled.backward()
        backward = snap and snap()
        optimizer.step()
        return forward, backward, local, scaled, x, y

    step()
    tracker = FSDPMemTracker(model, optimizer)
    tracker.track_inputs((inputs, targets))
    cpu = torch.device("cpu")

    def current():
        return {getattr(k, "value", k): v for k, v in tracker.get_tracker_snapshot("current")[cpu].items()}
    with tracker:
        forward, backward, local, scaled, x, y = step(current)
        after = current()
    peak = {getattr(k, "value", k): v for k, v in tracker.get_tracker_snapshot("peak")[cpu].items()}
    losses = sum(t.nelement() * t.element_size() for t in (local, scaled))
    print(json.dumps({"forward": forward, "backward": backward, "step": after, "peak": peak, "loss_bytes": losses,
                      "input_bytes": x.nelement() * x.element_size() + y.nelement() * y.element_size()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
    gc.collect()   # gloo's threads joined while the interpreter is whole (see examples/ddp_train.py)
