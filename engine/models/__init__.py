"""The model zoo's catalogue, importable without torch.

Every model is an ordered list of named blocks; every boundary between blocks is
a possible split point. ``build(config)`` (in ``engine.models.build``) makes the
blocks and the seeded data source and imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInfo:
    name: str
    description: str
    batch_size: int   # default batch size
    lr: float         # default SGD learning rate


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("seed-toy", "Linear(10,10), ReLU, Linear(10,5), MSE loss: the seed's ToyModel", 20, 0.001),
        ModelInfo("seed-linear", "Linear(5,2) on a random dataset of 100 rows of 5, batch 30: "
                  "the seed's DataParallel example", 30, 0.001),
        ModelInfo("seed-embedding", "Embedding(1000,10) then Linear(10,10): the seed's CPU+GPU model", 32, 0.001),
        ModelInfo("mlp", "--depth blocks of Linear(width,width)+ReLU, then Linear(width,10); cross-entropy",
                  2048, 0.01),
        ModelInfo("resnet18", "torchvision ResNet18, split at basic-block granularity", 32, 0.001),
        ModelInfo("resnet50", "torchvision ResNet50 at the tutorial's setup: 1000 classes, 128x128, MSE on "
                  "one-hot labels, split at bottleneck granularity", 120, 0.001),
    )
}

CUSTOM = "custom"  # the name a run from --model-file carries


class UnknownModel(ValueError):
    pass


def info(name: str) -> ModelInfo:
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownModel(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None
