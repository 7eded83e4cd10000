"""``--input-prep loader``: each step's batch comes through a real ``torch.utils.data.DataLoader``, as in every
real training job, and the rank's wait for it is the step's ``data`` (engine.run.feed times it).

The samples are the model's own seeded ones (engine.models.spec.DataSource), drawn once into a pool as
prepared batches are, so every strategy and every rank reads the same. Each sample costs real CPU work when it
is read: an image model's images are stored as JPEG files' bytes (encoded once, at start) and each is decoded,
cropped at random to a resized square, flipped at random and normalized, as torchvision's ImageNet recipe does
(PIL, which its ImageFolder reads images with, and ``transforms.v2``); any model's sample can cost
``--decode-cost`` CPU milliseconds more. The random choices are seeded by the sample's index: every rank decodes a sample alike.

A rank decodes only the rows of the global batch its step reads (``Executor.input_rows``: a replica's chunk, a
pipeline's first stage), as a DistributedSampler gives each replica its own; the other rows are zeros (one
buffer a batch), and a rank that reads no inputs gets none. One pass over the batches covers the run (a real
dataset's epoch is thousands of steps), so workers start once, before the first step, and prefetch from then on.
"""
from __future__ import annotations

import io
import os
import time
from collections.abc import Callable

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from engine.config import ExperimentConfig
from engine.run.loader_workers import OnCores

JPEG_QUALITY = 90
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]   # ImageNet's, as torchvision's recipes normalize


def is_image(inputs: torch.Tensor) -> bool:
    """A batch of RGB images (N, 3, H, W): decoded from JPEG on the way in."""
    return inputs.dim() == 4 and inputs.shape[1] == 3 and inputs.is_floating_point()


def spend_cpu(ms: float) -> None:
    """``ms`` milliseconds of this thread's CPU time in real work: the same work whatever else the machine runs
    (a wall-clock wait would shrink under load)."""
    if ms <= 0:
        return
    end = time.thread_time() + ms / 1000.0
    x = torch.ones(256)
    while time.thread_time() < end:
        x = torch.sin(x) + 1.0


class SampleSet(Dataset):
    """The pool's batches as a dataset of batches: item ``k`` is pool batch ``k``, its rows in ``rows(size)``
    decoded and the others zeros (one buffer, not a sample each). A batch an item, as each worker makes a whole
    batch anyway; kept whole, a pool's short batch (seed-linear's last) stays as the prepared batches have it."""

    def __init__(self, pool: list[tuple[torch.Tensor, torch.Tensor]], rows: Callable[[int], range],
                 decode_cost_ms: float, seed: int):
        self.targets = [y for _, y in pool]
        self.rows = [rows(len(x)) for x, _ in pool]
        self.decode_cost_ms, self.seed = decode_cost_ms, seed
        first = pool[0][0]
        self.image = is_image(first)
        self.shape, self.dtype = first.shape[1:], first.dtype
        self.offsets = [0]   # each batch's first sample's number among the pool's: its samples' seeds
        for x, _ in pool[:-1]:
            self.offsets.append(self.offsets[-1] + len(x))
        if self.image:
            self.stored = [{r: _jpeg(x[r]) for r in rows_k} for (x, _), rows_k in zip(pool, self.rows, strict=True)]
            self.augment = _augmentation(tuple(self.shape[1:]))
        else:
            self.stored = [{r: x[r] for r in rows_k} for (x, _), rows_k in zip(pool, self.rows, strict=True)]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, k: int):
        targets, rows = self.targets[k], self.rows[k]
        if not rows:   # a rank that reads no inputs (a pipeline's later stage): nothing to make
            return torch.zeros((0, *self.shape), dtype=self.dtype), targets
        inputs = torch.zeros((len(targets), *self.shape), dtype=self.dtype)
        for r in rows:
            inputs[r] = self.sample(k, r)
        return inputs, targets

    def sample(self, k: int, r: int) -> torch.Tensor:
        """Row ``r`` of batch ``k``, read: decoded and augmented (an image), plus the decode cost."""
        stored = self.stored[k][r]
        if self.image:
            from PIL import Image
            # The sample's own draws, leaving the process's generators alone (the CPU's only: seeding through
            # torch.manual_seed would reseed every GPU's too, on a rank that decodes itself).
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(self.seed * 1_000_003 + self.offsets[k] + r)
                stored = self.augment(Image.open(io.BytesIO(stored)).convert("RGB"))
        spend_cpu(self.decode_cost_ms)
        return stored


class PoolOrder(Sampler):
    """The pool's batches in turn, ``steps`` of them: one pass covers the run (a real dataset's epoch is
    thousands of steps)."""

    def __init__(self, batches: int, steps: int):
        self.batches, self.steps = batches, max(1, steps)

    def __iter__(self):
        return (k % self.batches for k in range(self.steps))

    def __len__(self) -> int:
        return self.steps


def _jpeg(image: torch.Tensor) -> bytes:
    """A synthetic float image as a JPEG file holds it: 8 bits a channel (its own range stretched to 0..255)."""
    from PIL import Image
    low, high = image.min(), image.max()
    pixels = ((image - low) / (high - low).clamp_min(1e-12) * 255).round().to(torch.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels.permute(1, 2, 0).contiguous().numpy()).save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def _augmentation(size: tuple[int, int]):
    from torchvision.transforms import v2
    return v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor(),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])


class BatchLoader:
    """The run's DataLoader over its ``SampleSet``: ``next()`` gives the next global batch (rows outside the
    rank's zero), waiting for a worker as a training loop does."""

    def __init__(self, config: ExperimentConfig, pool: list[tuple[torch.Tensor, torch.Tensor]],
                 rows: Callable[[int], range], cores: list[int], pin_memory: bool):
        samples = SampleSet(pool, rows, config.decode_cost_ms, config.seed)
        workers = config.loader_workers
        # batch_size=None: each item is a batch already (SampleSet), handed on as it is
        self.loader = DataLoader(samples, batch_size=None, sampler=PoolOrder(len(pool), config.steps),
                                 num_workers=workers, pin_memory=pin_memory,
                                 prefetch_factor=config.prefetch_factor if workers else None,
                                 persistent_workers=config.persistent_workers and workers > 0,
                                 worker_init_fn=OnCores(set(cores) or None, None, os.getpid()) if workers else None)
        self._batches = iter(self.loader)   # workers start now and prefetch before the first step

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        return next(self._batches)   # the pass has the run's steps (PoolOrder)

    def close(self) -> None:
        """End the workers now (a pass left unfinished keeps them until the iterator goes)."""
        shutdown = getattr(self._batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self._batches = iter(())
