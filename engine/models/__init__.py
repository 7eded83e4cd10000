"""The model catalogue, importable without torch.

A model is either an ordered list of named blocks (the built-in models and a
model file returning ``nn.Sequential``), every boundary between blocks a
possible split point, or any ``nn.Module`` (torchvision's models, a model file
returning anything else), whose split points are its named submodules and whose
stages torch.distributed.pipelining's tracer cuts (``engine.models.tracing``).
``build(config)`` (in ``engine.models.build``) makes the model and the seeded
data source and imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import ExperimentConfig


@dataclass(frozen=True)
class ModelInfo:
    name: str
    description: str
    batch_size: int   # default batch size
    lr: float         # default SGD learning rate
    tutorial_split: str | None = None
    """The block the model-parallel tutorial starts its second stage at (``--split NAME``)."""
    batch_origin: str = "its default"
    """Where ``batch_size`` comes from, as the app's suggestion says it ("suggested: 120 (the tutorial's)")."""
    imports: tuple[str, ...] = ()
    """What building it imports beyond torch (a fork server imports it once before forking: engine/forkserver)."""


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("seed-toy", "Linear(10,10), ReLU, Linear(10,5), MSE loss: the ToyModel of PyTorch's "
                  "model-parallel tutorial, learning a fixed teacher of its own shape", 20, 0.05,
                  batch_origin="the tutorial's"),
        ModelInfo("seed-linear", "Linear(5,2) on a dataset of 100 rows of 5 (targets from a linear teacher), "
                  "batch 30: PyTorch's data-parallel tutorial (RandomDataset(5, 100))", 30, 0.05,
                  batch_origin="the tutorial's"),
        ModelInfo("seed-embedding", "Embedding(1000,10) then Linear(10,10), learning a fixed vector per index: "
                  "the tutorials' DistributedModel (Embedding on the CPU, Linear on the GPU)", 32, 0.05),
        ModelInfo("mlp", "A stack of Linear+ReLU blocks (depth of them, each width features wide), then "
                  "Linear(width, 10); cross-entropy on 10 classes of noisy patterns", 2048, 0.01,
                  batch_origin="sized for CPU devices"),
        ModelInfo("resnet18", "torchvision ResNet18 (BatchNorm), 10 classes of 64x64 images, split at "
                  "basic-block granularity", 32, 0.01, tutorial_split="layer3",
                  batch_origin="sized for CPU devices", imports=("torchvision",)),
        ModelInfo("resnet50", "torchvision ResNet50 (BatchNorm) at the tutorial's setup: 1000 classes, 128x128, "
                  "MSE on one-hot labels, split at bottleneck granularity; the tutorial splits it at layer3", 120, 0.001, tutorial_split="layer3", batch_origin="the tutorial's",
                  imports=("torchvision",)),
    )
}

CUSTOM = "custom"  # the name a run from --model-file carries
TORCHVISION = "torchvision:"  # "torchvision:NAME": any classification model torchvision.models lists

TORCHVISION_DEFAULTS = ModelInfo("torchvision", "A torchvision classification model (weights not loaded), 10 "
                                 "classes of synthetic images at the size its weights expect", 8, 0.01,
                                 batch_origin="sized for CPU devices", imports=("torchvision",))
"""What a ``torchvision:NAME`` model defaults to (its own name and description come from torchvision)."""


SPLIT_LEVELS = {1: "the model's children (layer3)", 2: "one level deeper (layer3.0)"}
"""How deep in a module's tree its split points are (``--split-level``; engine.models.split_units)."""


def torchvision_name(model: str) -> str | None:
    """"resnet18" for "torchvision:resnet18"; None for any other model name."""
    return model[len(TORCHVISION):] if model.startswith(TORCHVISION) else None


def effective_batch_size(config: ExperimentConfig) -> int:
    """The run's global batch: the given one, else the model's (32 for a model file)."""
    if config.batch_size is not None:
        return config.batch_size
    known = lookup(config.model)
    return known.batch_size if known else 32


def lookup(model: str) -> ModelInfo | None:
    """The catalogue entry of a built-in or torchvision model; None for a model file or an unknown name."""
    if model in MODELS:
        return MODELS[model]
    if torchvision_name(model):
        return TORCHVISION_DEFAULTS
    return None


def model_imports(model: str) -> tuple[str, ...]:
    """What building ``model`` imports beyond torch (a model file's own imports are its own)."""
    known = lookup(model)
    return known.imports if known else ()


class UnknownModel(ValueError):
    pass


def info(name: str) -> ModelInfo:
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownModel(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None
