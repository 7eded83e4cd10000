"""The built-in models, each an ordered list of named blocks, with learnable synthetic data.

Every model's data has something to learn, so a run's loss curve shows training
working: regression targets come from a fixed random teacher network (seeded
apart from the student), and classification inputs are drawn around a fixed
random pattern per class. The teachers and patterns are fixed per model, not
per seed, so runs with different seeds learn the same task.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from engine.models.spec import DatasetSource, DataSource, ModelSpec

TEACHER_SEED = 7  # the fixed task every run of a model learns


def _teacher() -> torch.Generator:
    return torch.Generator().manual_seed(TEACHER_SEED)


def _fixed(*shape: int) -> torch.Tensor:
    """Part of a model's fixed task, always on the host (validation builds models on the meta device)."""
    return torch.randn(*shape, generator=_teacher(), device="cpu")


def _he_normal(features_in: int, features_out: int, g: torch.Generator) -> torch.Tensor:
    """A weight that keeps a ReLU layer's output at its input's scale (He et al.)."""
    return torch.randn(features_in, features_out, generator=g, device="cpu") * math.sqrt(2.0 / features_in)


def seed_toy(seed: int, **_) -> ModelSpec:
    blocks = [("net1", nn.Linear(10, 10)), ("relu", nn.ReLU()), ("net2", nn.Linear(10, 5))]
    # A teacher of the student's own shape: the task is exactly learnable.
    g = _teacher()
    w1, w2 = _he_normal(10, 10, g), _he_normal(10, 5, g) / math.sqrt(2.0)

    def make_batch(n, gen):
        x = torch.randn(n, 10, generator=gen)
        return x, torch.relu(x @ w1) @ w2
    return ModelSpec("seed-toy", blocks, F.mse_loss, DataSource(make_batch, seed))


def seed_linear(seed: int, **_) -> ModelSpec:
    # The seed's RandomDataset(input_size=5, length=100) with Model(5, 2); targets from a linear teacher.
    g = torch.Generator().manual_seed(seed + 2)
    inputs = torch.randn(100, 5, generator=g, device="cpu")
    targets = inputs @ _he_normal(5, 2, _teacher()) + 0.1 * torch.randn(100, 2, generator=g, device="cpu")
    return ModelSpec("seed-linear", [("fc", nn.Linear(5, 2))], F.mse_loss, DatasetSource(inputs, targets, seed))


def seed_embedding(seed: int, **_) -> ModelSpec:
    blocks = [("embedding", nn.Embedding(1000, 10)), ("rnn", nn.Linear(10, 10))]
    # Each index has a fixed target vector: the embedding table learns it.
    table = _fixed(1000, 10)

    def make_batch(n, gen):
        index = torch.randint(0, 1000, (n,), generator=gen)
        return index, table[index]
    return ModelSpec("seed-embedding", blocks, F.mse_loss, DataSource(make_batch, seed))


def _class_patterns(classes: int, shape: tuple[int, ...]) -> torch.Tensor:
    return _fixed(classes, *shape)


def mlp(seed: int, width: int = 512, depth: int = 8, **_) -> ModelSpec:
    blocks: list[tuple[str, nn.Module]] = []
    for i in range(depth):
        linear = nn.Linear(width, width)
        # He initialization: with torch's default a deep ReLU stack shrinks its signal
        # layer by layer, and an 8-deep MLP barely trains in a default-length run.
        nn.init.kaiming_normal_(linear.weight, nonlinearity="relu")
        nn.init.zeros_(linear.bias)
        blocks.append((f"layer{i}", nn.Sequential(linear, nn.ReLU())))
    blocks.append(("head", nn.Linear(width, 10)))
    patterns = _class_patterns(10, (width,))

    def make_batch(n, gen):
        labels = torch.randint(0, 10, (n,), generator=gen)
        return patterns[labels] + torch.randn(n, width, generator=gen), labels
    return ModelSpec("mlp", blocks, F.cross_entropy, DataSource(make_batch, seed))


def image_batches(classes: int, size: int):
    """Images drawn around a smooth random pattern per class (8x8 noise scaled up to the image size)."""
    coarse = _class_patterns(classes, (3, 8, 8))  # kept coarse: 1000 full-size patterns would be 200 MB

    def draw(n, gen):
        labels = torch.randint(0, classes, (n,), generator=gen)
        patterns = F.interpolate(coarse[labels], size=(size, size), mode="bilinear", align_corners=False)
        return patterns + torch.randn(n, 3, size, size, generator=gen), labels
    return draw


def _resnet_blocks(net) -> list[tuple[str, nn.Module]]:
    """A torchvision ResNet at basic/bottleneck-block granularity: stem, each block, head.

    Blocks are named like the tutorial's modules ("layer3.0" is layer3's first block),
    so ``--split layer3`` cuts where the tutorial does.
    """
    blocks: list[tuple[str, nn.Module]] = [
        ("stem", nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool))]
    for layer_name in ("layer1", "layer2", "layer3", "layer4"):
        for i, block in enumerate(getattr(net, layer_name)):
            blocks.append((f"{layer_name}.{i}", block))
    blocks.append(("head", nn.Sequential(net.avgpool, nn.Flatten(1), net.fc)))
    return blocks


def resnet50(seed: int, **_) -> ModelSpec:
    # The tutorial's setup: 1000 classes, 128x128 images, MSE on one-hot labels.
    from torchvision.models.resnet import Bottleneck, ResNet
    num_classes, size = 1000, 128
    net = ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes)
    draw = image_batches(num_classes, size)

    def make_batch(n, gen):
        images, labels = draw(n, gen)
        return images, F.one_hot(labels, num_classes).float()
    return ModelSpec("resnet50", _resnet_blocks(net), F.mse_loss, DataSource(make_batch, seed))


def resnet18(seed: int, **_) -> ModelSpec:
    # Sized for CPU devices: 10 classes, 64x64 images, cross-entropy.
    from torchvision.models.resnet import BasicBlock, ResNet
    net = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=10)
    return ModelSpec("resnet18", _resnet_blocks(net), F.cross_entropy, DataSource(image_batches(10, 64), seed))


BUILDERS = {
    "seed-toy": seed_toy,
    "seed-linear": seed_linear,
    "seed-embedding": seed_embedding,
    "mlp": mlp,
    "resnet18": resnet18,
    "resnet50": resnet50,
}
