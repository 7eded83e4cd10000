"""What each device holds for a candidate, from the probe (engine/advise/model_probe.py): its parameters,
gradients and optimizer state (``ModelProbe.state_bytes_per_param_byte``), and the activations its backward
keeps for the samples it has in flight.

- single: everything, and the whole batch's activations;
- ddp: everything, a gradient buffer as large as the parameters (its buckets), its slice's activations;
- fsdp: 1/n of the state, the largest block's parameters and gradients gathered whole, its slice's activations;
- tensor parallel: 1/n of the split pairs' state and all of the rest, the whole batch's activations (each device
  keeps the pairs' inputs whole);
- a split: its stages' state, and each stage's activations for the micro-batches it holds at once: all of them
  for GPipe and looped BFS (every forward before the first backward), at most one per stage in the pipeline for
  the 1F1B family (``p x V``: its first stage holds the most).

Not counted: torch itself (``engine.devices.RANK_MEMORY``: "auto" leaves it out of the limit), the allocator's
slack on a GPU, the temporaries of a step's peak (engine/strategies/fsdp_peak.py measures FSDP's in a run).
"""
from __future__ import annotations

from engine.advise.results import Candidate, ModelProbe
from engine.strategies.pipeline.schedules import SCHEDULE_INFO

EVERY_MICRO_BATCH = ("gpipe", "loopedbfs")


def in_flight(schedule: str, micro_batches: int, devices: int, per_device: int) -> int:
    """Micro-batches a stage may hold activations for at once."""
    if schedule in EVERY_MICRO_BATCH:
        return micro_batches
    return min(micro_batches, devices * per_device)


def per_device(candidate: Candidate, model: ModelProbe, batch_size: int, devices: int) -> list[int]:
    """Bytes each of the candidate's devices holds at its step's peak."""
    return HELD[candidate.strategy](candidate, model, batch_size, devices)


def _single(candidate: Candidate, model: ModelProbe, batch_size: int, devices: int) -> list[int]:
    saved = sum(b.saved_bytes for b in model.blocks)
    return [int(model.param_bytes * model.state_bytes_per_param_byte + saved * batch_size)]


def _ddp(candidate: Candidate, model: ModelProbe, batch_size: int, devices: int) -> list[int]:
    params, saved = model.param_bytes, sum(b.saved_bytes for b in model.blocks)
    replica = -(-batch_size // devices)
    return [int(params * model.state_bytes_per_param_byte + params + saved * replica)] * devices


def _fsdp(candidate: Candidate, model: ModelProbe, batch_size: int, devices: int) -> list[int]:
    blocks, saved = model.blocks, sum(b.saved_bytes for b in model.blocks)
    replica = -(-batch_size // devices)
    largest = max((b.param_bytes for b in blocks), default=0)
    return [int(model.param_bytes * model.state_bytes_per_param_byte / devices + 2 * largest
                + saved * replica)] * devices


def _tensor_parallel(candidate: Candidate, model: ModelProbe, batch_size: int, devices: int) -> list[int]:
    split = sum(pair.param_bytes for pair in model.tensor_parallel_pairs)
    saved = sum(b.saved_bytes for b in model.blocks)
    return [int((model.param_bytes - split + split / devices) * model.state_bytes_per_param_byte
                + saved * batch_size)] * devices


def _split(candidate: Candidate, model: ModelProbe, batch_size: int, devices: int) -> list[int]:
    """A split's stages (the naive split: one stage a device, the whole batch at once)."""
    blocks, states = model.blocks, model.state_bytes_per_param_byte
    schedule = SCHEDULE_INFO[candidate.schedule or "gpipe"]
    v = candidate.stages_per_device or 1
    m = candidate.micro_batches or 1
    edges = (0, *(candidate.split or ()), len(blocks))
    stages = [blocks[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    held = in_flight(schedule.name, m, devices, v)
    out = []
    for device in range(devices):
        mine = [stages[s] for s in schedule.stages_of(device, devices, v) if s < len(stages)]
        state = sum(b.param_bytes for stage in mine for b in stage) * states
        activations = sum(b.saved_bytes for stage in mine for b in stage) * batch_size / m * held
        out.append(int(state + activations))
    return out


# Each strategy advise considers (engine/advise/candidates.py), and how its devices' memory is made up.
HELD = {"single": _single, "ddp": _ddp, "fsdp": _fsdp, "tensor-parallel": _tensor_parallel,
        "model-parallel": _split, "pipeline": _split}
