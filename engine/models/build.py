"""Build a config's model: seeded blocks (or module), data and loss (imports torch)."""
from __future__ import annotations

import torch

from engine.config import ExperimentConfig
from engine.models import custom, torchvision_name, zoo
from engine.models.spec import ModelSpec


def build(config: ExperimentConfig) -> ModelSpec:
    """The same config and seed give the same initial parameters in every process."""
    torch.manual_seed(config.seed)
    if config.model_file:
        return custom.build(config.model_file, config.seed, config.split_level)
    if torchvision_name(config.model):
        from engine.models import torchvision_zoo
        return torchvision_zoo.build(torchvision_name(config.model), config.seed, config.image_size,
                                     config.split_level)
    return zoo.BUILDERS[config.model](seed=config.seed, width=config.width, depth=config.depth)
