"""The one-process executors (the tutorials' code shape, used on GPUs and for cpu+cuda mixes),
checked on the CPU: they must train exactly what one device trains."""
from __future__ import annotations

import pytest
import torch

from engine.config import ExperimentConfig
from engine.devices import Device
from engine.measure.timing import StepTimer
from engine.models.build import build
from engine.rules import effective_batch_size
from engine.strategies.base import RankContext
from engine.strategies.pipeline.in_process_stages import InProcessStages
from engine.strategies.single import SingleDevice


def train(executor_factory, config, devices, split=None, steps=3):
    spec = build(config)
    ctx = RankContext(config=config, rank=0, world_size=1, devices=devices, split=split, spec=spec,
                      timer=StepTimer())
    executor = executor_factory(ctx)
    batches = spec.data.batches(effective_batch_size(config))
    intervals = {}
    for _ in range(steps):
        ctx.timer.begin_step()
        result = executor.step(*executor.place_batch(*next(batches)))
        intervals = ctx.timer.end_step()
    return result.loss_part, executor.param_sq(), intervals


@pytest.mark.parametrize("model,micro_batches", [("mlp", 1), ("mlp", 4), ("seed-embedding", 2)])
def test_in_process_stages_match_single_device(model, micro_batches):
    torch.set_num_threads(1)
    config = ExperimentConfig(model=model, width=32, depth=4, batch_size=32, lr=0.1)
    cpu = [Device("cpu:0", "cpu", 0, None), Device("cpu:1", "cpu", 1, None)]
    loss_1, sq_1, _ = train(SingleDevice, config, cpu[:1])
    loss_2, sq_2, intervals = train(lambda ctx: InProcessStages(ctx, micro_batches), config, cpu, split=(1,))
    assert loss_2 == pytest.approx(loss_1, rel=1e-5)
    assert sq_2 == pytest.approx(sq_1, rel=1e-5)
    # each stage's forward, backward and update are timed on its own device
    for name in ("cpu:0", "cpu:1"):
        kinds = {k for k, _, _ in intervals[name]}
        assert {"forward", "backward", "optimizer"} <= kinds


def test_a_stage_without_parameters_needs_no_optimizer():
    """seed-toy's blocks are Linear, ReLU, Linear: split 1,2 gives the ReLU a stage of its own."""
    torch.set_num_threads(1)
    config = ExperimentConfig(model="seed-toy", batch_size=20, lr=0.1)
    cpu = [Device(f"cpu:{k}", "cpu", k, None) for k in range(3)]
    loss_1, sq_1, _ = train(SingleDevice, config, cpu[:1])
    loss_3, sq_3, intervals = train(lambda ctx: InProcessStages(ctx, 2), config, cpu, split=(1, 2))
    assert loss_3 == pytest.approx(loss_1, rel=1e-5) and sq_3 == pytest.approx(sq_1, rel=1e-5)
    assert "optimizer" not in {k for k, _, _ in intervals["cpu:1"]}


@pytest.mark.parametrize("model,split,micro_batches", [
    ("transformer", (3,), 1), ("transformer", (2, 5), 2),
    ("resnet18", (6,), 1),
    ("resnet18", (2,), 1),  # torchvision's own, cut where a stage starts with its in-place ReLU
    # Inside residual blocks: the next stage gets the block's input and its norm, two tensors.
    ("transformer-deeper", (6,), 2), ("transformer-deeper", (2, 6), 1),
])
def test_in_process_traced_stages_match_single_device(model, split, micro_batches):
    """Any module in one process (the naive split on GPUs, shared or mixed devices): traced stages, each
    cut input's gradient handed back by hand, train what one device trains."""
    from engine.strategies.pipeline.in_process_traced_stages import InProcessTracedStages
    from helpers import ROOT
    torch.set_num_threads(1)
    if model.startswith("transformer"):
        config = ExperimentConfig(model="custom", model_file=str(ROOT / "examples" / "tiny_transformer.py"),
                                  batch_size=16, lr=0.1, split_level=2 if model.endswith("deeper") else 1)
    else:
        config = ExperimentConfig(model="torchvision:resnet18", image_size=32, batch_size=8, lr=0.05)
    cpu = [Device(f"cpu:{k}", "cpu", k, None) for k in range(len(split) + 1)]
    loss_1, sq_1, _ = train(SingleDevice, config, cpu[:1])
    loss_n, sq_n, intervals = train(lambda ctx: InProcessTracedStages(ctx, micro_batches), config, cpu, split=split)
    assert loss_n == pytest.approx(loss_1, rel=1e-4)
    assert sq_n == pytest.approx(sq_1, rel=1e-5)
    for name in intervals:
        assert {"forward", "backward"} <= {k for k, _, _ in intervals[name]}
