"""The memory a run's tensors use per device, by kind (engine/measure/tensor_memory.py), counted in-process."""
from __future__ import annotations

import pytest
import torch

from engine import strategies
from engine.config import ExperimentConfig
from engine.devices import parse
from engine.measure.tensor_memory import TensorMeter
from engine.measure.timing import StepTimer
from engine.models.build import build
from engine.strategies.base import RankContext

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

WIDTH, DEPTH, BATCH = 64, 4, 32
FLOAT = 4


def measured(strategy: str, devices: int, **options) -> dict[str, dict[str, int]]:
    """Two steps of an mlp under ``strategy`` in this process; the second step's figures."""
    config = ExperimentConfig(strategy=strategy, model="mlp", width=WIDTH, depth=DEPTH, batch_size=BATCH,
                              devices=f"cpu:{devices}", steps=2, **options)
    spec = build(config)
    split = (2,) if strategies.get(strategy).uses_split else None
    ctx = RankContext(config=config, rank=0, world_size=1, devices=parse(config.devices, devices), split=split,
                      spec=spec, timer=StepTimer(cuda_indices=[]))
    executor = strategies.get(strategy).build(ctx)
    meter = TensorMeter(executor.placements())
    try:
        inputs, targets = executor.place_batch(*spec.data.sample(BATCH))
        for _ in range(2):
            ctx.timer.begin_step()
            meter.before_step()
            executor.step(inputs, targets)
            ctx.timer.end_step()
            memory = meter.after_step()
        return memory
    finally:
        meter.close()
        executor.close()


def model_bytes() -> int:
    blocks = DEPTH * (WIDTH * WIDTH + WIDTH)
    return (blocks + WIDTH * 10 + 10) * FLOAT


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_one_device_holds_the_whole_model_and_every_activation_once():
    (memory,) = measured("single", 1).values()
    assert memory["params"] == model_bytes() and memory["grads"] == model_bytes()
    assert memory["optimizer"] == 0  # plain SGD keeps no state
    # Saved for backward: the input, then each block's ReLU output (the next Linear saves the same storage,
    # counted once); the Linear weights are parameters, never activations. Then the loss's: cross-entropy's
    # log-softmax output (10 classes), the int64 targets and nll_loss's total weight (a float scalar).
    assert memory["activations"] == (DEPTH + 1) * BATCH * WIDTH * FLOAT + LOSS_SAVED


LOSS_SAVED = BATCH * 10 * FLOAT + BATCH * 8 + FLOAT


def test_a_split_model_spreads_its_parameters_and_replicas_each_hold_all():
    split = measured("model-parallel", 2)
    assert sum(m["params"] for m in split.values()) == model_bytes()
    assert all(0 < m["params"] < model_bytes() for m in split.values())
    replicas = measured("data-parallel", 2)
    assert [m["params"] for m in replicas.values()] == [model_bytes(), model_bytes()]


def test_the_activation_peak_is_what_is_live_at_once_and_backward_releases_it():
    """GPipe keeps every micro-batch's activations until its backward passes: the same peak as one batch.
    Counted live, the peak does not grow with the steps (each step's are released by its backward)."""
    one_batch = measured("model-parallel", 2)
    gpipe = measured("pipeline", 2, micro_batches=4, schedule="gpipe")
    # The same bytes, but for the loss's scalar total weight, which each of the 4 micro-batches' losses saves.
    assert [m["activations"] for m in gpipe.values()] == [m["activations"] for m in one_batch.values()][:1] + \
        [list(one_batch.values())[1]["activations"] + 3 * FLOAT]


def test_a_replicas_slice_of_the_batch_counts_its_own_bytes():
    """data-parallel on cpu:2: each replica saves its half of the batch (a view of the whole batch's storage)
    by the half's bytes; the loss, on the gathered outputs, is the first device's."""
    replicas = measured("data-parallel", 2)
    half = (DEPTH + 1) * (BATCH // 2) * WIDTH * FLOAT
    assert [m["activations"] for m in replicas.values()] == [half + LOSS_SAVED, half]


