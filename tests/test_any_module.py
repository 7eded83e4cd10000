"""Any nn.Module (issue 14): a user's non-Sequential model and torchvision's own models, split at named
submodules that the pipelining tracer cuts, train as one device trains them."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from engine.config import ExperimentConfig
from engine.models.build import build
from engine.models.split_units import split_units
from engine.store import Store
from helpers import ROOT, cli, cli_together

TRANSFORMER = str(ROOT / "examples" / "tiny_transformer.py")
UNTRACEABLE = str(ROOT / "tests" / "untraceable_model.py")
TRANSFORMER_RUN = ["run", "--model-file", TRANSFORMER, "--batch-size", "32", "--steps", "4", "--warmup", "1", "--json"]


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def assert_same_training(summary: dict, single: dict) -> None:
    assert summary["status"] == "finished", summary.get("error")
    assert summary["loss"]["first"] != summary["loss"]["last"]  # it trained
    for key in ("param_norm", "param_change"):
        assert rel(summary[key], single[key]) <= 1e-4, key
    assert rel(summary["loss"]["last"], single["loss"]["last"]) <= 1e-4


def test_the_example_transformer_split_at_a_named_block_trains_as_one_device():
    single, naive, piped, inside, ddp, vee, dualpipe = cli_together(
        [*TRANSFORMER_RUN, "--devices", "cpu:1"],
        [*TRANSFORMER_RUN, "--strategy", "model-parallel", "--devices", "cpu:2", "--split", "layers.2"],
        [*TRANSFORMER_RUN, "--strategy", "pipeline", "--micro-batches", "4", "--schedule", "1f1b",
         "--devices", "cpu:2", "--split", "layers.2"],
        # one level deeper, inside a residual block: the second stage receives two tensors (x and norm1(x))
        [*TRANSFORMER_RUN, "--strategy", "pipeline", "--micro-batches", "4", "--devices", "cpu:2",
         "--split-level", "2", "--split", "layers.1.attn"],
        [*TRANSFORMER_RUN, "--strategy", "ddp", "--devices", "cpu:2"],
        # the Vs (zbv, dualpipev): each rank holds two neighbouring traced stages, whose warm-up must not send to
        # itself
        [*TRANSFORMER_RUN, "--strategy", "pipeline", "--micro-batches", "4", "--schedule", "zbv", "--devices",
         "cpu:2", "--split", "2,3,4"],
        [*TRANSFORMER_RUN, "--strategy", "pipeline", "--micro-batches", "4", "--schedule", "dualpipev",
         "--devices", "cpu:2", "--split", "2,3,4"])
    assert_same_training(vee, single)
    assert_same_training(dualpipe, single)
    for summary in (naive, piped):
        assert summary["split"] == [3]  # embed, layers.0, layers.1 | layers.2, ...
        assert_same_training(summary, single)
    assert inside["split"] == [6]  # embed, layers.0.norm1, .attn, .norm2, .mlp, layers.1.norm1 | layers.1.attn
    assert_same_training(inside, single)
    assert_same_training(ddp, single)


def test_torchvision_resnet18_unmodified_split_at_layer3():
    """torchvision's own resnet18 (get_model): the naive split at layer3 trains exactly as one device (it sees
    the whole batch, BatchNorm included); a pipeline runs too, even cut where a stage starts in place, and a
    zero-bubble one where a stage ends with the flatten before fc (a view, which its split backward detaches)."""
    run = ["run", "--model", "torchvision:resnet18", "--image-size", "32", "--batch-size", "8", "--steps", "3",
           "--warmup", "1", "--json"]
    single, naive, piped, vee = cli_together(
        [*run, "--devices", "cpu:1"],
        [*run, "--strategy", "model-parallel", "--devices", "cpu:2", "--split", "layer3"],
        # At relu, the second stage starts with torchvision's ReLU(inplace=True) on the activation it receives.
        [*run, "--strategy", "pipeline", "--devices", "cpu:2", "--split", "relu", "--micro-batches", "2"],
        [*run, "--strategy", "pipeline", "--devices", "cpu:2", "--schedule", "zbv", "--micro-batches", "4",
         "--split", "layer3,layer4,fc"])
    assert naive["split"] == [6]  # conv1, bn1, relu, maxpool, layer1, layer2 | layer3, ...
    assert_same_training(naive, single)
    assert piped["status"] == "finished" and piped["split"] == [2]
    assert vee["status"] == "finished", vee.get("error")
    assert vee["split"] == [6, 7, 9] and vee["steps_measured"] == 2


FAMILIES = {  # one of each kind, at tiny input sizes
    "mobilenet_v3_small": 32,
    "vit_b_16": 32,        # a vision transformer, told its image size at construction
    "regnet_x_400mf": 32,  # its constructor cannot run on the meta device: validation builds it for real
}


def test_torchvision_families_run_single_and_as_a_two_stage_pipeline():
    torch.set_num_threads(1)
    for name, size in FAMILIES.items():
        # single, in this process: two steps of torchvision's model on its synthetic images
        spec = build(ExperimentConfig(model=f"torchvision:{name}", image_size=size, batch_size=4, steps=2))
        model, batches = spec.whole(), spec.data.batches(4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(2):
            inputs, targets = next(batches)
            loss = spec.loss_fn(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            assert torch.isfinite(loss), name
    # a 2-stage pipeline of each, as a user runs it, at the balanced split; but the vision transformer's, whose
    # 86 M parameters each rank builds and traces (half of this test's time): a transformer cut into a pipeline
    # is the example transformer's test, its construction at an image size the single run above
    piped = {name: size for name, size in FAMILIES.items() if name != "vit_b_16"}
    summaries = cli_together(*[["run", "--model", f"torchvision:{name}", "--image-size", str(size), "--batch-size",
                                "4", "--steps", "2", "--warmup", "0", "--strategy", "pipeline", "--devices", "cpu:2",
                                "--micro-batches", "2", "--json"] for name, size in piped.items()])
    for name, summary in zip(piped, summaries, strict=True):
        assert summary["status"] == "finished" and summary["steps"] == 2, name
        assert len(summary["split"]) == 1 and len(summary["devices_busy"]) == 2, name


def test_a_model_that_cannot_be_traced_is_refused_before_launch(fresh_store):
    proc = cli("run", "--model-file", UNTRACEABLE, "--strategy", "pipeline", "--devices", "cpu:2", "--steps", "2")
    assert proc.returncode == 2
    assert "data-dependent control flow at untraceable_model.py:14" in proc.stderr
    assert "single, data-parallel and ddp run the model as it is" in proc.stderr
    with Store(fresh_store) as store:
        assert store.list_runs() == []  # nothing stored, as running or otherwise
    # the same model runs as it is where nothing traces it
    _, single = cli("run", "--model-file", UNTRACEABLE, "--devices", "cpu:1", "--steps", "2", "--warmup", "0",
                    "--json", check_json=True)
    assert single["status"] == "finished"


class HeadDeclaredFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(8, 2)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(2))
        self.unused = nn.Linear(8, 8)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_split_units_follow_the_call_order_and_expand_module_lists():
    model = HeadDeclaredFirst()
    names = [name for name, _ in split_units(model, 1, torch.randn(2, 8))]
    assert names == ["blocks.0", "blocks.1", "head"]  # called order; `unused` is never called
    deeper = [name for name, _ in split_units(model, 2, torch.randn(2, 8))]
    assert deeper == ["blocks.0.0", "blocks.0.1", "blocks.1.0", "blocks.1.1", "head"]
    assert model.training  # the pass that found the order left the module's mode as it was


class ReusedAndTied(nn.Module):
    """One ReLU called twice, and a head whose weight is the embedding's."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.act = nn.ReLU()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 8)
        self.head = nn.Linear(8, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.act(self.second(self.act(self.first(self.embed(x))))))


def test_a_reused_submodule_is_no_split_point_and_a_tied_weight_is_never_cut_apart():
    from engine.models import tracing
    from engine.models.spec import ModelSpec
    model = ReusedAndTied()
    units = split_units(model, 1, torch.zeros(2, dtype=torch.long))
    assert [name for name, _ in units] == ["embed", "first", "second", "head"]  # not `act`, called twice
    spec = ModelSpec("tied", units, None, None, module=model)
    with pytest.raises(tracing.TraceError, match="puts the parameter head.weight in more than one stage"):
        tracing.cut(spec, (2,), torch.zeros(2, dtype=torch.long))


def test_torchvision_split_levels_name_submodules():
    one = build(ExperimentConfig(model="torchvision:resnet18", image_size=32))
    two = build(ExperimentConfig(model="torchvision:resnet18", image_size=32, split_level=2))
    assert one.block_names == ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4",
                               "avgpool", "fc"]
    assert "layer3.0" in two.block_names and "layer3" not in two.block_names


def test_the_balanced_split_of_any_module_comes_from_its_traced_units():
    from engine.planner import planning
    torch.set_num_threads(1)
    spec = build(ExperimentConfig(model="custom", model_file=TRANSFORMER))
    infos = planning.block_costs(spec, 32)
    assert [b.name for b in infos] == ["embed", "layers.0", "layers.1", "layers.2", "layers.3", "norm", "head"]
    assert all(b.cost_s > 0 for b in infos) and infos[1].params == infos[2].params > 0
    assert infos[1].out_bytes == 16 * 64 * 4  # a sequence of 16 tokens of 64 floats leaves each block
    # Four equal blocks carry the work: two stages get two each (noise may move it one block).
    (split,) = planning.balanced_split([b.cost_s for b in infos], 2)
    assert 2 <= split <= 4


def test_models_command_lists_split_points_and_torchvision(capsys):
    from engine import cli as cli_mod
    assert cli_mod.main(["models", "--model-file", TRANSFORMER, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed["split_points"]][:3] == ["embed", "layers.0", "layers.1"]
    # each block's FLOPs per sample: the four equal layers alike, the embedding's lookup none
    flops = [r["flops_per_sample"] for r in listed["split_points"]]
    assert flops[0] == 0 and flops[1] == flops[2] == flops[3] == flops[4] > 0
    assert len(listed["balanced_split"]) == 1
    assert cli_mod.main(["models", "--torchvision", "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)}
    assert {"torchvision:resnet18", "torchvision:vit_b_16", "torchvision:mobilenet_v3_small"} <= names
