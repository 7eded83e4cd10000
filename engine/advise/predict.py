"""Each candidate's step time, predicted from one probe of the model and one of the devices' communication.

The probe gives each block's forward and backward at any sample count (a time per call and per sample), its
optimizer step, and what every rank's step pays beside them (``ModelProbe.step_overhead_s``); the link probe
gives each communication's latency and time per byte (engine/advise/link_probe.py). From them:

- single: one device's whole step, as the probe timed it;
- ddp: each device's slice of the batch, then the gradients' all-reduce (in DDP's 25 MiB buckets);
- fsdp: the slice, and per block two all-gathers of its parameters (forward, backward) and a reduce-scatter of its
  gradients, the optimizer on 1/n of the state;
- tensor parallel: the split pairs' work on 1/n, the rest whole, on the whole batch, and two all-reduces of each
  pair's activations (forward, backward);
- a split (the naive split is GPipe with one micro-batch): the what-if's simulation of the schedule's action list
  (engine/planner/what_if.py ``simulated_step``) with each device's forward and backward per micro-batch from its
  stages' blocks at the micro-batch's size, the optimizer and the step's own cost after its last action, and the
  measured hand-over (latency and bytes of the activation crossing) on both sides of each action that sends or
  receives one, as the what-if's fitted figure does.

Devices that share a core (more CPU virtual devices than cores) take turns: a step takes at least the work of the
devices on its busiest core, and a data-parallel step's compute as many times its own as devices share the core.
The devices' collectives were measured with every device's process on its core, so shared as they will be.
"""
from __future__ import annotations

import math
from collections import Counter

from engine.advise import memory
from engine.advise.results import BlockProbe, Candidate, LinkProbe, ModelProbe, Prediction
from engine.devices import Device
from engine.planner.what_if import DeviceTimes, simulated_step
from engine.strategies.pipeline.schedules import SCHEDULE_INFO

DDP_BUCKET_BYTES = 25 << 20   # DistributedDataParallel's default bucket_cap_mb
MIB = float(1 << 20)


def predict(candidate: Candidate, devices: list[Device], model: ModelProbe, link: LinkProbe | None,
            batch_size: int, memory_limit: int) -> Prediction:
    """``devices``: the candidate's own (single's one)."""
    n = len(devices)
    held = max(memory.per_device(candidate, model, batch_size, n))
    fits = held <= memory_limit
    predictor = _single if link is None else PREDICTORS[candidate.strategy]   # one device: nothing exchanged
    step, compute, communication, bubble, words = predictor(candidate, model, link, batch_size, devices)
    words += f"; {_size(held)} on the fullest device" + ("" if fits else f", over the {_size(memory_limit)} limit")
    return Prediction(step, compute, communication, bubble, held, fits, words)


def _forward_backward(blocks: list[BlockProbe], samples: float) -> float:
    return sum(b.forward_s(samples) + b.backward_s(samples) for b in blocks)


def _single(candidate: Candidate, model: ModelProbe, link: LinkProbe | None, batch_size: int, devices: list[Device]):
    # The probe's whole step, and the blocks' time per sample for any samples beyond those it timed.
    more = max(0, batch_size - model.probed_samples)
    step = model.whole_step_s + more * sum(b.forward_per_sample_s + b.backward_per_sample_s for b in model.blocks)
    compute = step - model.step_overhead_s
    return step, compute, 0.0, 0.0, f"one device does all the work, {_ms(step)} a step, and waits for no other"


def _sharing(devices: list[Device]) -> int:
    """The most devices on one core (1 on GPUs, or a core each)."""
    cores = Counter(d.core for d in devices if d.kind == "cpu" and d.core is not None)
    return max(cores.values(), default=1)


def _ddp(candidate: Candidate, model: ModelProbe, link: LinkProbe, batch_size: int, devices: list[Device]):
    params = model.param_bytes
    buckets = max(1, math.ceil(params / DDP_BUCKET_BYTES))
    communication = buckets * link.all_reduce.latency_s + link.all_reduce.per_byte_s * params
    return _replicas(model, batch_size, devices, communication, sum(b.optimizer_s for b in model.blocks),
                     f"the gradients' all-reduce ({params / MIB:.3g} MiB)")


def _fsdp(candidate: Candidate, model: ModelProbe, link: LinkProbe, batch_size: int, devices: list[Device]):
    sharded = [b.param_bytes for b in model.blocks if b.param_bytes]
    communication = sum(2 * link.all_gather.seconds(size) + link.reduce_scatter.seconds(size) for size in sharded)
    return _replicas(model, batch_size, devices, communication,
                     sum(b.optimizer_s for b in model.blocks) / len(devices),
                     f"{2 * len(sharded)} all-gathers of the blocks' parameters and {len(sharded)} reduce-scatters "
                     "of their gradients")


def _replicas(model: ModelProbe, batch_size: int, devices: list[Device], communication: float, optimizer: float,
              what: str):
    """A data-parallel step: each device's slice of the batch, its optimizer share, then ``what`` it exchanges."""
    n = len(devices)
    replica = math.ceil(batch_size / n)
    compute = _forward_backward(model.blocks, replica) + optimizer
    shared = _sharing(devices)
    step = shared * (compute + model.step_overhead_s) + communication
    words = (f"each of {n} devices computes {replica} of the {batch_size} samples ({_ms(compute)}); {what} take "
             f"{_ms(communication)}, {communication / step:.0%} of the step")
    if shared > 1:
        words += f"; {shared} devices share each core, so their compute takes turns"
    return step, compute, communication, communication / step, words


def _tensor_parallel(candidate: Candidate, model: ModelProbe, link: LinkProbe, batch_size: int,
                     devices: list[Device]):
    n = len(devices)
    pairs = model.tensor_parallel_pairs
    split = sum(p.param_bytes for p in pairs) / (model.param_bytes or 1)   # the pairs' share of the work
    kept = 1.0 - split + split / n
    compute = (_forward_backward(model.blocks, batch_size) + sum(b.optimizer_s for b in model.blocks)) * kept
    element = 4   # float32 activations
    communication = sum(link.all_reduce.seconds(batch_size * p.row_out * element)
                        + link.all_reduce.seconds(batch_size * p.column_in * element) for p in pairs)
    shared = _sharing(devices)
    step = shared * (compute + model.step_overhead_s) + communication
    words = (f"each of {n} devices computes 1/{n} of {len(pairs)} pairs of linear layers on the whole batch "
             f"({_ms(compute)}); {2 * len(pairs)} all-reduces of their activations take {_ms(communication)}, "
             f"{communication / step:.0%} of the step")
    return step, compute, communication, communication / step, words


def _staged(candidate: Candidate, model: ModelProbe, link: LinkProbe, batch_size: int, devices: list[Device]):
    schedule = SCHEDULE_INFO[candidate.schedule or "gpipe"]
    p, v = len(devices), candidate.stages_per_device or 1
    m = candidate.micro_batches or 1
    samples = batch_size / m
    edges = (0, *(candidate.split or ()), len(model.blocks))
    stages = [model.blocks[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    times = []
    for device in range(p):
        mine = [b for s in schedule.stages_of(device, p, v) for b in stages[s]]
        forward = sum(b.forward_s(samples) for b in mine)
        backward = sum(b.backward_s(samples) for b in mine)
        # the step's own cost (the loss, zeroing the gradients, the calls around the stages) after its last action
        after = sum(b.optimizer_s for b in mine) + model.step_overhead_s
        times.append(DeviceTimes(forward, backward, backward / 2, after))
    crossing = [stage[-1].out_bytes * samples for stage in stages[:-1]]
    handover = sum(crossing) / len(crossing)
    per_handover = link.point_to_point.seconds(handover)
    simulated, bubble = simulated_step(schedule, v, times, m, 1.0, per_handover, link.two_way_extra_s)
    busy = {device: m * (t.forward + t.backward) + t.optimizer for device, t in zip(devices, times, strict=True)}
    cores: Counter = Counter()
    for device, work in busy.items():
        cores[device.core if device.kind == "cpu" else device.name] += work
    step = max(simulated, max(cores.values()))
    compute = max(busy.values())
    handovers = 2 * m * (len(stages) - 1)   # each micro-batch's activation forward and gradient back, per boundary
    communication = handovers * per_handover / p
    balance = min(busy.values()) / compute if compute > 0 else 1.0
    words = (f"bubble {max(0.0, bubble):.0%} (the devices' idle share of the step, waiting for each other); "
             f"{handovers} hand-overs of {_size(handover)} a step, {_ms(per_handover)} each; stages balanced "
             f"{balance:.2f} (least busy device's compute over the busiest's)")
    if step > simulated * 1.0001:
        words += "; devices sharing a core take turns"
    return step, compute, communication, max(0.0, bubble), words


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _size(nbytes: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} B"


# Each strategy advise considers (engine/advise/candidates.py), and how its step is predicted.
PREDICTORS = {"single": _single, "ddp": _ddp, "fsdp": _fsdp, "tensor-parallel": _tensor_parallel,
              "model-parallel": _staged, "pipeline": _staged}
