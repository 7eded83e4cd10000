"""The executor behind fsdp, hsdp, tensor-parallel and fsdp+tp: one process per device on a torch DeviceMesh.

The mesh is (data parallel, tensor parallel): fsdp uses its first dimension
alone, tensor-parallel its second alone, fsdp+tp both (tensor parallel first,
then FSDP over the already-split parameters, as torch's 2-D recipe does). hsdp's
mesh is (replicate, shard), both data parallel: FSDP2 given a 2-D mesh shards
within a row and all-reduces the gradients' shards across the rows. A
data-parallel group's ranks each take their torch.chunk of the batch, as ddp's
do, with the loss weighted by the chunk's share so FSDP's averaging of
gradients gives the whole batch's mean-loss gradient; the ranks of a
tensor-parallel group read the same chunk. Every collective the step calls is
timed and counted by ``engine.measure.communication.collective_meter``.
"""
from __future__ import annotations

from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import parallelize_module

from engine.measure.communication import collective_meter
from engine.measure.tensor_memory import Placement
from engine.precision import make_optimizer
from engine.strategies.base import (
    Executor,
    RankContext,
    StepResult,
    place_on,
    replica_batch,
    replica_loss,
    replica_rows,
)
from engine.strategies.tensor_parallel_plan import parallelize_plan


class ShardedExecutor(Executor):
    def __init__(self, ctx: RankContext, *, shard: bool, tp_width: int, replicas: int = 1):
        self.rank = ctx.rank
        self.device = ctx.devices[ctx.rank]
        self.timer = ctx.timer
        self.loss_fn = ctx.spec.loss_fn
        self.tp_width = tp_width
        self.dp = ctx.world_size // tp_width
        if replicas > 1:
            # HSDP: FSDP2 on a 2-D mesh shards over its second dimension and replicates over its first; every rank
            # is a data-parallel one (no tensor parallel), its place in the batch its rank.
            mesh = data_mesh = init_device_mesh(self.device.kind, (replicas, self.dp // replicas),
                                                mesh_dim_names=("replicate", "shard"))
            self.dp_rank, self.tp_rank = ctx.rank, 0
        else:
            mesh = init_device_mesh(self.device.kind, (self.dp, tp_width), mesh_dim_names=("dp", "tp"))
            data_mesh = mesh["dp"]
            self.dp_rank, self.tp_rank = mesh["dp"].get_local_rank(), mesh["tp"].get_local_rank()
        # This rank's place along each of the mesh's dimensions, by name (reported_parameters).
        self.place = {name: mesh[name].get_local_rank() for name in mesh.mesh_dim_names}
        self.module = ctx.spec.whole().to(self.device.torch_device)
        if tp_width > 1:
            parallelize_module(self.module, mesh["tp"], parallelize_plan(self.module, tp_width))
        if shard:
            # Each block its own FSDP unit (gathered for its forward, freed after), then the root for the rest.
            for _, block in ctx.spec.blocks:
                if any(True for _ in block.parameters()):
                    fully_shard(block, mesh=data_mesh)
            fully_shard(self.module, mesh=data_mesh)
        self.optimizer = make_optimizer(self.module.parameters(), ctx.config)
        self.sharded = shard
        self.meter = collective_meter(self.timer, ctx.comm, self.device)

    def place_batch(self, inputs, targets):
        return place_on(self.timer, self.device, inputs, targets)

    def input_rows(self, batch_size: int) -> range:
        return replica_rows(batch_size, self.dp, self.dp_rank)

    def step(self, inputs, targets) -> StepResult:
        dev, timer = self.device, self.timer
        total = int(inputs.shape[0])
        x, y, sizes = replica_batch(inputs, targets, self.dp, self.dp_rank)
        mine = int(x.shape[0])
        with self.meter:
            self.optimizer.zero_grad(set_to_none=True)
            with timer.span(dev, "forward"):
                local, scaled = replica_loss(self.loss_fn, self.module(x), y, total, self.dp)
            with timer.span(dev, "backward"):
                scaled.backward()
            with timer.span(dev, "optimizer"):
                self.optimizer.step()
        # A tensor-parallel group computes its chunk's loss once per device: its first device reports it.
        first_of_group = self.tp_rank == 0
        part = float(local.detach()) * mine / total if mine and first_of_group else 0.0
        # Each device's batch, in rank order: the mesh is row-major, so rank r is in replica r // tp_width.
        split = [sizes[r // self.tp_width] for r in range(self.dp * self.tp_width)] \
            if self.rank == 0 and self.dp > 1 else None
        return StepResult(loss_part=part, samples=mine if first_of_group else 0, batch_split=split)

    def reported_parameters(self) -> list:
        """Each parameter's values once over the ranks: a shard where it is sharded, a replicated one's on the
        first rank that holds it (the worker adds up every rank's sums)."""
        owned = []
        # A DTensor on one dimension's mesh (fsdp+tp's head, sharded over "dp" alone) is a copy per rank of the other.
        for p in self.module.parameters():
            if isinstance(p, DTensor):
                coordinate, names = p.device_mesh.get_coordinate(), p.device_mesh.mesh_dim_names or ()
                if all(c == 0 for c, placement in zip(coordinate, p.placements, strict=True)
                       if placement.is_replicate()) \
                        and all(at == 0 for dim, at in self.place.items() if dim not in names):
                    owned.append(p.to_local())
            elif self.rank == 0:
                owned.append(p)
        return owned

    def step_peak(self):
        if not self.sharded:
            return None
        from engine.strategies.fsdp_peak import FsdpStepPeak
        return FsdpStepPeak(self.module, self.optimizer, self.device)

    def placements(self) -> list[Placement]:
        return [Placement(self.device, self.module, self.optimizer)]
