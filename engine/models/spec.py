"""``ModelSpec``: a model as an ordered list of named blocks (or any module and its split units), with its
seeded data and loss."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class ModelSpec:
    name: str
    blocks: list[tuple[str, nn.Module]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    data: DataSource
    module: nn.Module | None = None
    """Any nn.Module, whose ``blocks`` are then its split units (named submodules, in the order its forward
    first calls them: engine.models.split_units) and whose stages the pipelining tracer cuts; None when the
    blocks, run in order, are the model."""

    @property
    def traced(self) -> bool:
        """Stages are cut by tracing the module, not by slicing the blocks."""
        return self.module is not None

    def whole(self) -> nn.Module:
        """The whole model, as the strategies that do not split it train it."""
        return self.module if self.module is not None else self.sequential()

    def sequential(self, start: int = 0, stop: int | None = None) -> nn.Sequential:
        """Blocks [start, stop) as one nn.Sequential, keeping their names ("layer1.0" as "layer1_0":
        a submodule's own name cannot hold a dot)."""
        if self.module is not None:
            raise TypeError(f"{self.name} is not a chain of blocks: cut its stages with engine.models.tracing")
        return nn.Sequential(OrderedDict((name.replace(".", "_"), block) for name, block in self.blocks[start:stop]))

    @property
    def block_names(self) -> list[str]:
        return [name for name, _ in self.blocks]

    @property
    def has_batch_norm(self) -> bool:
        """BatchNorm's statistics depend on the batch it sees: a micro-batch or a replica's slice
        trains differently from the whole batch on one device."""
        modules = self.module.modules() if self.module is not None else (
            m for _, block in self.blocks for m in block.modules())
        return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in modules)


class DataSource:
    """Seeded synthetic batches: the same seed gives every strategy (and every rank) the same batches.

    ``make_batch(batch_size, generator)`` is called once per step with one
    generator, so each rank that draws the batches sees the same sequence.
    """

    def __init__(self, make_batch: Callable[[int, torch.Generator], Batch], seed: int):
        self._make_batch = make_batch
        self._generator = torch.Generator().manual_seed(seed + 1)

    def batches(self, batch_size: int) -> Iterator[Batch]:
        while True:
            yield self._make_batch(batch_size, self._generator)

    def sample(self, batch_size: int) -> Batch:
        """One batch from a separate generator: profiling must not shift the training batches."""
        return self._make_batch(batch_size, torch.Generator().manual_seed(12345))

    def example_inputs(self, batch_size: int, on: torch.device | str = "cpu") -> torch.Tensor:
        """Inputs of one sample batch, drawn on the host (even while validation builds on the meta device)
        and then put ``on`` a device: what finding split units and tracing run the model on."""
        with torch.device("cpu"):
            inputs = self.sample(batch_size)[0]
        return inputs[:batch_size].to(on)


class DatasetSource(DataSource):
    """A fixed dataset walked in shuffled epochs, the last batch of each epoch partial.

    This is PyTorch's data-parallel tutorial's DataLoader(RandomDataset(5, 100), batch_size=30,
    shuffle=True): batches of 30, 30, 30 and 10.
    """

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, seed: int):
        self._inputs, self._targets = inputs, targets
        self._generator = torch.Generator().manual_seed(seed + 1)

    def batches(self, batch_size: int) -> Iterator[Batch]:
        rows = self._inputs.shape[0]
        while True:
            order = torch.randperm(rows, generator=self._generator)
            for start in range(0, rows, batch_size):
                index = order[start:start + batch_size]
                yield self._inputs[index], self._targets[index]

    def sample(self, batch_size: int) -> Batch:
        return self._inputs[:batch_size], self._targets[:batch_size]
