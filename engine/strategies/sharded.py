"""fsdp, hsdp, tensor-parallel and fsdp+tp: the strategies that shard the model over one process per device.

fsdp (FSDP2, ``torch.distributed.fsdp.fully_shard``) keeps 1/n of every parameter,
gradient and optimizer state on each device and gathers a block's parameters
for its forward and backward; each device trains on its slice of the batch, as
ddp does. hsdp shards the same way within groups of devices and keeps one such
copy per group (FSDP2 on a 2-D mesh: the gathers and scatters stay within a group,
only the gradients' all-reduce crosses groups; more memory than fsdp).
tensor-parallel (``torch.distributed.tensor.parallel``) splits pairs of
linear layers column-wise then row-wise: every device sees the whole batch and
holds a slice of each paired layer. fsdp+tp does both on a 2-D device mesh:
tensor parallel within pairs of devices, FSDP across the pairs. Their trade is
memory against communication (engine.measure.tensor_memory, engine.measure.communication).
"""
from __future__ import annotations

from engine.problems import Problem
from engine.strategies.base import replica_device_problems
from engine.strategies.strategy import Strategy

# fsdp+tp's tensor-parallel width: devices per model replica's tensor-parallel group (the rest is FSDP).
FSDP_TP_WIDTH = 2
# hsdp's shard group: devices that share one copy of the model between them (the groups replicate it).
HSDP_SHARD_GROUP = 2


class _Sharded(Strategy):
    rank_imports = ("engine.strategies.sharded_executor",)
    needs_process_group = True
    shards = False      # FSDP over the data-parallel devices
    min_devices = 1
    group = 1           # devices that work as one (fsdp+tp: a tensor-parallel pair; hsdp: a pair sharing a copy)
    group_does = ""     # what a group does, for the refusal of a count that is not a multiple of it

    def tp_width(self, n_devices: int) -> int:
        """Devices each paired linear layer is split over (1: none)."""
        return 1

    def replicas(self, n_devices: int) -> int:
        """Copies of the model FSDP keeps, each sharded over its group of devices (1: one, over every device)."""
        return 1

    def world_size(self, config, devices) -> int:
        return len(devices)

    def check(self, config, devices, n_blocks) -> list[Problem]:
        found = replica_device_problems(self.name, devices, "one per process")
        if len(devices) < self.min_devices:
            found.append(Problem("devices", f"{self.name} needs at least {self.min_devices} devices, got {len(devices)}"))
        if len(devices) % self.group:
            found.append(Problem("devices", f"{self.name} needs a multiple of {self.group} devices (groups of "
                                            f"{self.group} {self.group_does}), got {len(devices)}"))
        return found

    def devices_needed(self, config) -> int:
        return max(2, self.min_devices)

    def model_problems(self, config, spec, devices) -> list[Problem]:
        width = self.tp_width(len(devices))
        if width == 1:
            return []
        from engine.strategies.tensor_parallel_plan import plan_problems
        return plan_problems(spec, width, self.name, "model_file" if config.model_file else "model")

    def build(self, ctx):
        from engine.strategies.sharded_executor import ShardedExecutor
        n = len(ctx.devices)
        return ShardedExecutor(ctx, shard=self.shards, tp_width=self.tp_width(n), replicas=self.replicas(n))


class Fsdp(_Sharded):
    name = "fsdp"
    description = ("FSDP2 (fully_shard per block and at the root): each device keeps 1/n of the parameters, "
                   "gradients and optimizer state, gathers a block's parameters to run it, and trains on its "
                   "slice of the batch (all-gather and reduce-scatter timed as communication).")
    data_parallel = True
    shards = True


class Hsdp(_Sharded):
    name = "hsdp"
    description = (f"HSDP (FSDP2 on a 2-D device mesh): the parameters, gradients and optimizer state sharded within "
                   f"groups of {HSDP_SHARD_GROUP} devices and replicated across the groups; each device trains on its "
                   "slice of the batch, the gradients reduce-scattered within a group and all-reduced across them "
                   f"(timed as communication; a multiple of {HSDP_SHARD_GROUP} devices, at least "
                   f"{2 * HSDP_SHARD_GROUP}).")
    data_parallel = True
    shards = True
    min_devices = 2 * HSDP_SHARD_GROUP
    group, group_does = HSDP_SHARD_GROUP, "that each hold one sharded copy"
    collectives_span_all_ranks = False   # sharded within groups, replicated across them

    def replicas(self, n_devices: int) -> int:
        return n_devices // HSDP_SHARD_GROUP


class TensorParallel(_Sharded):
    name = "tensor-parallel"
    description = ("Tensor parallel: pairs of linear layers split column-wise then row-wise over every device, "
                   "each device on the whole batch (all-reduces timed as communication); chains of linear "
                   "layers only.")
    min_devices = 2

    def tp_width(self, n_devices: int) -> int:
        return n_devices


class FsdpTp(_Sharded):
    name = "fsdp+tp"
    description = (f"FSDP across groups of {FSDP_TP_WIDTH} devices, tensor parallel within each group, on a 2-D "
                   "device mesh: the linear pairs' slices sharded again (an even number of devices, at least 4).")
    data_parallel = True
    shards = True
    min_devices = 2 * FSDP_TP_WIDTH
    group, group_does = FSDP_TP_WIDTH, "for tensor parallel"
    collectives_span_all_ranks = False   # tensor parallel within pairs, FSDP across them

    def tp_width(self, n_devices: int) -> int:
        return FSDP_TP_WIDTH
