"""The built-in models of design.md's zoo, each an ordered list of named blocks."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from engine.models.spec import DataSource, DatasetSource, ModelSpec


def seed_toy(seed: int, **_) -> ModelSpec:
    blocks = [("net1", nn.Linear(10, 10)), ("relu", nn.ReLU()), ("net2", nn.Linear(10, 5))]

    def make_batch(n, g):
        return torch.randn(n, 10, generator=g), torch.randn(n, 5, generator=g)
    return ModelSpec("seed-toy", blocks, F.mse_loss, DataSource(make_batch, seed))


def seed_linear(seed: int, **_) -> ModelSpec:
    # The seed's RandomDataset(input_size=5, length=100) with Model(5, 2).
    g = torch.Generator().manual_seed(seed + 2)
    inputs = torch.randn(100, 5, generator=g)
    targets = torch.randn(100, 2, generator=g)
    return ModelSpec("seed-linear", [("fc", nn.Linear(5, 2))], F.mse_loss, DatasetSource(inputs, targets, seed))


def seed_embedding(seed: int, **_) -> ModelSpec:
    blocks = [("embedding", nn.Embedding(1000, 10)), ("rnn", nn.Linear(10, 10))]

    def make_batch(n, g):
        return torch.randint(0, 1000, (n,), generator=g), torch.randn(n, 10, generator=g)
    return ModelSpec("seed-embedding", blocks, F.mse_loss, DataSource(make_batch, seed))


def mlp(seed: int, width: int = 512, depth: int = 8, **_) -> ModelSpec:
    blocks: list[tuple[str, nn.Module]] = [
        (f"layer{i}", nn.Sequential(nn.Linear(width, width), nn.ReLU())) for i in range(depth)]
    blocks.append(("head", nn.Linear(width, 10)))

    def make_batch(n, g):
        return torch.randn(n, width, generator=g), torch.randint(0, 10, (n,), generator=g)
    return ModelSpec("mlp", blocks, F.cross_entropy, DataSource(make_batch, seed))


def _resnet_blocks(net) -> list[tuple[str, nn.Module]]:
    """A torchvision ResNet at basic/bottleneck-block granularity: stem, each block, head."""
    blocks: list[tuple[str, nn.Module]] = [
        ("stem", nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool))]
    for layer_name in ("layer1", "layer2", "layer3", "layer4"):
        for i, block in enumerate(getattr(net, layer_name)):
            blocks.append((f"{layer_name}.{i}", block))
    blocks.append(("head", nn.Sequential(net.avgpool, nn.Flatten(1), net.fc)))
    return blocks


def resnet50(seed: int, **_) -> ModelSpec:
    # The tutorial's setup: 1000 classes, 128x128 images, MSE on one-hot labels.
    from torchvision.models.resnet import ResNet, Bottleneck
    num_classes, size = 1000, 128
    net = ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes)

    def make_batch(n, g):
        images = torch.randn(n, 3, size, size, generator=g)
        labels = torch.randint(0, num_classes, (n,), generator=g)
        return images, F.one_hot(labels, num_classes).float()
    return ModelSpec("resnet50", _resnet_blocks(net), F.mse_loss, DataSource(make_batch, seed))


def resnet18(seed: int, **_) -> ModelSpec:
    # Sized for CPU devices: 10 classes, 64x64 images, cross-entropy.
    from torchvision.models.resnet import ResNet, BasicBlock
    num_classes, size = 10, 64
    net = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes)

    def make_batch(n, g):
        return torch.randn(n, 3, size, size, generator=g), torch.randint(0, num_classes, (n,), generator=g)
    return ModelSpec("resnet18", _resnet_blocks(net), F.cross_entropy, DataSource(make_batch, seed))


BUILDERS = {
    "seed-toy": seed_toy,
    "seed-linear": seed_linear,
    "seed-embedding": seed_embedding,
    "mlp": mlp,
    "resnet18": resnet18,
    "resnet50": resnet50,
}
