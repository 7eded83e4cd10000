"""Every built-in model with every strategy its blocks allow, on CPU virtual devices (issue: the whole zoo).

One module-scoped pass runs the matrix (tiny batch, two steps) through RunSession,
as the CLI and the app do; the tests read its results. Every run reads its batches
through a DataLoader (--input-prep loader: the ResNets' images decoded from JPEG and
augmented), so every strategy runs with the loader; its worker processes are
tests/test_input_loader.py's, and the batches prepared ahead, the default, every
other test's. Models without BatchNorm
must train exactly what one device trains; models with BatchNorm must say why
they cannot.
"""
from __future__ import annotations

import math

import pytest

from engine import models
from engine.config import ExperimentConfig
from engine.run.session import RunSession
from engine.run.validate import plan

STRATEGIES = {
    "single": dict(devices="cpu:1"),
    "data-parallel": dict(devices="cpu:2"),
    "ddp": dict(devices="cpu:2"),
    "model-parallel": dict(devices="cpu:2"),
    "pipeline": dict(devices="cpu:2", micro_batches=2),
    "fsdp": dict(devices="cpu:2"),
    "tensor-parallel": dict(devices="cpu:2"),
}  # fsdp+tp and hsdp, four processes a run, train mlp in tests/test_sharding.py
# Tensor parallelism needs two consecutive linear layers: seed-toy and mlp have them.
NO_LINEAR_PAIR = {"seed-linear", "seed-embedding", "resnet18", "resnet50"}
BATCH_NORM = {"resnet18", "resnet50"}
# The matrix runs in the first test's setup: about 65 s here, room for a slower machine.
pytestmark = pytest.mark.timeout(900)
TINY = dict(batch_size=4, steps=2, warmup=1, width=32, depth=3, input_prep="loader")
# The ResNets split where the tutorial does (its seq2 starts at layer3): no block timing needed.
TUTORIAL_SPLIT = {"resnet18": (5,), "resnet50": (8,)}


def cases():
    for model in models.MODELS:
        for strategy, options in STRATEGIES.items():
            config = ExperimentConfig(model=model, strategy=strategy, **TINY, **options)
            if strategy in ("model-parallel", "pipeline") and model in TUTORIAL_SPLIT:
                config = config.replace(split=TUTORIAL_SPLIT[model])
            yield model, strategy, config


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    db = tmp_path_factory.mktemp("zoo") / "runs.sqlite3"
    results, refused = {}, {}
    for model, strategy, config in cases():
        run_plan, problems = plan(config)
        if problems:
            refused[model, strategy] = problems
            continue
        session = RunSession(config, db_path=db, telemetry_hz=10)
        session.start()
        results[model, strategy] = session.wait(240)
    return results, refused


def test_every_model_runs_every_strategy_its_blocks_allow(matrix):
    results, refused = matrix
    # Only a one-block model cannot be split, and only pairs of linear layers split for tensor parallelism;
    # everything else runs.
    tensor_parallel = {(m, "tensor-parallel") for m in NO_LINEAR_PAIR}
    assert set(refused) == {("seed-linear", "model-parallel"), ("seed-linear", "pipeline")} | tensor_parallel, refused
    assert all("only 1 blocks" in str(p) for key, problems in refused.items() for p in problems
               if key not in tensor_parallel)
    assert all("nn.Linear" in str(p) for key in tensor_parallel for p in refused[key])
    for (model, strategy), result in results.items():
        assert result is not None and result.status == "finished", (model, strategy, result and result.error)
        summary = result.summary
        assert summary.steps == 2 and all(math.isfinite(v) for v in (summary.loss.first, summary.loss.last)), summary


@pytest.mark.parametrize("model", sorted(set(models.MODELS) - BATCH_NORM))
def test_models_without_batch_norm_match_one_device_with_every_strategy(matrix, model):
    results, _ = matrix
    single = results[model, "single"].summary
    for strategy in STRATEGIES:
        if (model, strategy) not in results:
            continue
        summary = results[model, strategy].summary
        assert summary.param_norm == pytest.approx(single.param_norm, rel=1e-4), strategy
        # What training did, not the initial values that dominate the norm: a wrong update shows here.
        assert summary.param_change == pytest.approx(single.param_change, rel=1e-4), strategy
        assert summary.param_change > 0
        assert summary.loss.last == pytest.approx(single.loss.last, rel=1e-4), strategy
        # nothing to warn of but the FLOP count on a measured step (these runs' --warmup 1)
        assert [n for n in summary.notes if not n.startswith("step 1's FLOPs were counted")] == [], summary.notes


@pytest.mark.parametrize("model", sorted(BATCH_NORM))
def test_models_with_batch_norm_say_why_they_differ_from_one_device(matrix, model):
    results, _ = matrix
    for strategy in STRATEGIES:
        if (model, strategy) not in results:
            continue
        notes = results[model, strategy].summary.notes
        # Replica slices (data-parallel, ddp, fsdp) and micro-batches (pipeline) change the statistics;
        # one device and the naive split see the whole batch.
        if strategy in ("data-parallel", "ddp", "pipeline", "fsdp"):
            assert any("BatchNorm" in n for n in notes), (strategy, notes)
        else:
            assert not any("BatchNorm" in n for n in notes), (strategy, notes)
    # ... and the naive split, which sees the whole batch, matches one device even with BatchNorm.
    naive, single = results[model, "model-parallel"].summary, results[model, "single"].summary
    assert naive.param_change == pytest.approx(single.param_change, rel=1e-4)


@pytest.mark.parametrize("model,split", sorted(TUTORIAL_SPLIT.items()))
def test_the_tutorial_split_puts_the_stem_layer1_and_layer2_on_stage_0(capsys, model, split):
    from engine import cli
    from engine.run.validate import resolve_split_names
    config = ExperimentConfig(model=model, strategy="model-parallel", devices="cpu:2")
    assert resolve_split_names(config, ["layer3"]) == split
    names = plan(config.replace(split=split))[0].block_names
    first_stage = names[:split[0]]
    assert first_stage[0] == "stem" and {n.split(".")[0] for n in first_stage[1:]} == {"layer1", "layer2"}
    assert names[split[0]] == "layer3.0"
    # One option on the command line; a name that is no block is refused naming the blocks there are.
    assert cli.main(["run", "--model", model, "--strategy", "model-parallel", "--devices", "cpu:2",
                     "--split", "layer9", "--steps", "1"]) == cli.EXIT_INVALID
    err = capsys.readouterr().err
    assert "--split: no block named 'layer9'" in err and "layer3.0" in err
    assert models.MODELS[model].tutorial_split == "layer3"
