"""The split backward's probe (engine/strategies/pipeline/split_backward_probe.py), with torch's own functions."""
from __future__ import annotations

import time

import pytest
import torch
from torch import nn
from torch.distributed.pipelining import _backward

from engine.results import SplitCost
from engine.strategies.pipeline.split_backward_probe import LastInputs, split_backward_extra_s

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def stage(width: int) -> nn.Module:
    return nn.Sequential(*(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(3)))


def two_stages_after_a_step():
    torch.manual_seed(0)
    modules = [stage(32), stage(32)]
    kept = LastInputs(modules)
    x = torch.randn(8, 32)
    modules[1](modules[0](x))            # a step not armed: nothing kept
    assert kept.inputs == {}
    kept.armed = True
    activation = modules[0](x)
    kept.keep_target(torch.randint(0, 32, (8,)))
    modules[1](activation.detach().requires_grad_())
    return modules, kept


def test_the_probe_times_each_stage_on_its_last_inputs_and_leaves_no_gradient():
    modules, kept = two_stages_after_a_step()
    assert set(kept.inputs) == {0, 1}
    assert kept.inputs[1][0][0] == torch.Size([8, 32])   # a shape, not the activation itself
    cost, why_not = split_backward_extra_s(modules, [0, 1], 1, kept, nn.functional.cross_entropy,
                                           torch.device("cpu"))
    assert why_not is None and isinstance(cost.extra_s, float) and 0 <= cost.fixed_s <= cost.extra_s
    assert all(p.grad is None for m in modules for p in m.parameters())


@pytest.mark.solo   # compares measured times with each other (the fixed part against the whole): alone
@pytest.mark.parametrize("per_sample", [False, True])
def test_the_extra_is_what_the_split_costs_more_per_call_or_per_sample(monkeypatch, per_sample):
    """torch's split functions made 200 ms slower than its whole backward, a call (fixed) or 25 ms a sample of
    the 8 (none of it fixed): the probe finds about 200 ms per stage, 400 for the two (the fastest of each: load
    only adds), and on half the micro-batch the same or half, so which part is fixed (bounds that a loaded
    machine's noise on millisecond backwards cannot cross, a sign or sum slip would: at 100 ms a stage, a loaded
    CI machine read 106 ms fixed of 243 where none was)."""
    input_half = _backward.stage_backward_input

    def slow_input_half(outputs, grads, inputs, *args, **kwargs):
        time.sleep(0.025 * inputs[0].shape[0] if per_sample else 0.2)
        return input_half(outputs, grads, inputs, *args, **kwargs)
    monkeypatch.setattr(_backward, "stage_backward_input", slow_input_half)
    modules, kept = two_stages_after_a_step()
    cost, why_not = split_backward_extra_s(modules, [0, 1], 1, kept, nn.functional.cross_entropy,
                                           torch.device("cpu"))
    # at least 0.4 less what load adds to the whole backwards' fastest (CI, phase one, at half this: 0.199 of 0.2)
    assert why_not is None and 0.34 <= cost.extra_s < 4.0, cost
    if per_sample:
        assert cost.fixed_s < 0.2 and cost.at(0.5) < 0.75 * cost.extra_s, cost
    else:
        assert cost.fixed_s > 0.2 and cost.at(0.5) > 0.75 * cost.extra_s, cost


def test_a_probe_that_cannot_measure_says_why_and_token_ids_count_nothing():
    modules, kept = two_stages_after_a_step()

    def broken_loss(output, target):
        raise ValueError("a model file's loss refusing the probe")
    assert split_backward_extra_s(modules, [0, 1], 1, kept, broken_loss, torch.device("cpu")) \
        == (None, "ValueError: a model file's loss refusing the probe")
    embedding = nn.Sequential(nn.Embedding(10, 8), nn.Flatten(), nn.Linear(16, 4))
    ids = LastInputs([embedding])
    ids.armed = True
    embedding(torch.randint(0, 10, (3, 2)))
    assert split_backward_extra_s([embedding], [0], 0, ids, None, torch.device("cpu")) == (SplitCost(0.0, 0.0), None)
    never_ran = LastInputs([stage(4)])
    cost, why_not = split_backward_extra_s([stage(4)], [1], 1, never_ran, None, torch.device("cpu"))
    assert cost is None and "stage 1 ran no forward" in why_not


def test_inputs_not_batch_first_are_kept_whole_on_the_half_sized_micro_batch():
    """A stage also given a floating input of its own shape (S, D), position ids (S,) and a scalar: only what has
    the micro-batch's first dimension is cut to half of it (cutting all of them failed the device's probe)."""
    class TakesAll(nn.Module):
        def forward(self, *inputs):
            return inputs[0]
    module = TakesAll()
    kept = LastInputs([module])
    kept.armed = True
    module(torch.randn(8, 6, 16), torch.randn(6, 16), torch.arange(6), torch.tensor(2.0), torch.arange(8))
    assert [tuple(t.shape) for t in kept.remade(0, 4)] == [(4, 6, 16), (6, 16), (6,), (), (4,)]
    assert [tuple(t.shape) for t in kept.remade(0)] == [(8, 6, 16), (6, 16), (6,), (), (8,)]
    scalar_only = LastInputs([module])
    scalar_only.armed = True
    module(torch.tensor(1.0))
    assert scalar_only.rows(0) == 0 and scalar_only.remade(0)[0].shape == ()
