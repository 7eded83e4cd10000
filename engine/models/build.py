"""Build a config's model: seeded blocks, data and loss (imports torch)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from engine.models import custom, zoo
from engine.models.spec import ModelSpec

if TYPE_CHECKING:
    from engine.config import ExperimentConfig


def build(config: ExperimentConfig) -> ModelSpec:
    """The same config and seed give the same initial parameters in every process."""
    torch.manual_seed(config.seed)
    if config.model_file:
        return custom.build(config.model_file, config.seed)
    return zoo.BUILDERS[config.model](seed=config.seed, width=config.width, depth=config.depth)
