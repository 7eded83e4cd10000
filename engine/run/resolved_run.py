"""A run resolved once: its devices, its ranks' devices, its micro-batches and its bubble's theory.

``resolve`` is the one place a config's devices are parsed and its theory computed. The session resolves its
run when it starts and sends it to the worker on the worker's first line (engine/wire/worker.py RunRequest); the
worker places its ranks by it; the validation child answers with it, the model's blocks added
(engine/run/validate.py); the app previews a config through the same call (app/state/plan_state.py). A run over
nodes is the one refinement: the worker learns their devices when it connects, and takes ``with_devices`` of
what they have.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from engine import devices as devices_mod, strategies
from engine.config import ExperimentConfig
from engine.devices import Device
from engine.record.summary import theoretical_bubble, theory_formula, unique_devices, why_no_theory
from engine.rules import effective_micro_batches, effective_stages_per_device
from engine.wire import codec

CHANNEL = "the resolved run"


@dataclass(frozen=True)
class ResolvedRun:
    """What a valid config resolves to, for every process of its run and for the app."""
    devices: list[Device]
    world_size: int                    # its processes (ranks)
    micro_batches: int
    theory_bubble: float | None        # (p-1)/(m+p-1) and its kin; None where no formula holds
    theory_text: str                   # the formula with its values, as the bubble box shows it
    theory_notes: list[str] = field(default_factory=list)   # why no formula holds, where none does
    n_blocks: int = 0                  # the model's blocks (0: a script's, or not built)
    block_names: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def device_names(self) -> list[str]:
        """Each physical device once, in order (stages that share a device share its figures)."""
        return unique_devices([d.name for d in self.devices])

    def rank_devices(self, rank: int) -> list[Device]:
        """The devices rank ``rank`` works on: its own, or every device when it is alone (a split in one
        process)."""
        return worked_devices(self.devices, rank, self.world_size)

    def with_devices(self, devices: list[Device]) -> ResolvedRun:
        """The same run on the devices its nodes have (the worker learns them when it connects)."""
        return replace(self, devices=list(devices))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data) -> ResolvedRun:
        """The run as sent; codec.WireError naming the field where it is garbled."""
        return codec.typed(cls, data, CHANNEL)


def own_device(devices: list[Device], rank: int, world: int) -> Device:
    """The device a process is pinned to: its rank's, or when alone its first CPU device (else its first). A
    rank, which gets only the devices (engine/wire/rank.py read_devices), asks here."""
    return devices[rank] if world > 1 else next((d for d in devices if d.kind == "cpu"), devices[0])


def worked_devices(devices: list[Device], rank: int, world: int) -> list[Device]:
    """The devices a process works on: its rank's, or every one when it is alone. A rank, which gets only the
    devices (engine/wire/rank.py read_devices), asks here as ``ResolvedRun.rank_devices`` does."""
    return list(devices) if world == 1 else [devices[rank]]


def devices_needed(config: ExperimentConfig) -> int:
    """How many devices a spec that leaves it open ("auto") should get."""
    known = strategies.STRATEGIES.get(config.strategy)
    if known is not None:
        return known.devices_needed(config)
    return len(config.split) + 1 if config.split is not None else 2


def run_devices(config: ExperimentConfig, *, gpus: int | None = None, cores: list[int] | None = None) -> list[Device]:
    """The devices a config's run gets, or DeviceError saying why not: this machine's (``gpus`` and ``cores``
    where the caller knows them better: the app's inventory), or every node's by the spec alone
    (engine.nodes.cluster; their agents check they have them)."""
    if config.nodes:
        from engine.nodes.address import AddressError, parse_nodes
        from engine.nodes.cluster import cluster_devices
        try:
            return cluster_devices(config.devices, parse_nodes(config.nodes))
        except AddressError as exc:
            raise devices_mod.DeviceError(f"--nodes: {exc}") from None
    devices = devices_mod.parse(config.devices, devices_needed(config), gpus=gpus, cores=cores)
    known = strategies.STRATEGIES.get(config.strategy)
    return known.placed(config, devices) if known is not None else devices


def resolve(config: ExperimentConfig, devices: list[Device] | None = None, *, gpus: int | None = None,
            n_blocks: int = 0, block_names: list[str] | None = None,
            warnings: list[str] | None = None) -> ResolvedRun:
    """``config`` resolved on ``devices`` (default: ``run_devices``, DeviceError where its spec is wrong)."""
    devices = list(devices) if devices is not None else run_devices(config, gpus=gpus)
    world = strategies.get(config.strategy).world_size(config, devices)
    names = [d.name for d in devices]
    micro_batches, per_device = effective_micro_batches(config), effective_stages_per_device(config)   # V
    own = world > 1
    why_not = why_no_theory(config.strategy, names, micro_batches, own, config.schedule)
    return ResolvedRun(
        devices=devices, world_size=world, micro_batches=micro_batches,
        theory_bubble=theoretical_bubble(config.strategy, names, micro_batches, own, config.schedule, per_device),
        theory_text=theory_formula(config.schedule, len(unique_devices(names)), micro_batches, per_device),
        theory_notes=[why_not] if why_not else [], n_blocks=n_blocks, block_names=list(block_names or []),
        warnings=list(warnings or []))
