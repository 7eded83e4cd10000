"""``--input-prep loader``: each step's batch comes through a real ``torch.utils.data.DataLoader``, as in every
real training job, and the rank's wait for it is the step's ``data`` (engine.run.feed times it).

The samples are the model's own seeded ones (engine.models.spec.DataSource), drawn once into a pool as
prepared batches are, so every strategy and every rank reads the same. Each sample costs real CPU work when it
is read: an image model's images are stored as JPEG files' bytes (encoded once, at start) and each is decoded,
cropped at random to a resized square, flipped at random and normalized, as torchvision's ImageNet recipe does
(PIL, which its ImageFolder reads images with, and ``transforms.v2``); any model's sample can cost
``--decode-cost`` CPU milliseconds more. The random choices are seeded by the sample's index: every rank decodes a sample alike.

A rank decodes only the rows of the global batch its step reads (``Executor.input_rows``: a replica's chunk, a
pipeline's first stage), as a DistributedSampler gives each replica its own; the other rows are zeros that cost
nothing. One pass over the samples covers the run (a real dataset's epoch is thousands of steps), so workers
start once, before the first step, and prefetch from then on.
"""
from __future__ import annotations

import io
import time

import torch
from torch.utils.data import DataLoader, Dataset

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
    """The pool's samples as a dataset: ``length`` samples, sample i being the pool's i modulo its size; rows
    of a batch outside ``rows`` are zeros."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, batch_size: int, rows: range, length: int,
                 decode_cost_ms: float, seed: int):
        self.targets, self.batch_size, self.rows, self.length = targets, batch_size, rows, length
        self.decode_cost_ms, self.seed = decode_cost_ms, seed
        self.image = is_image(inputs)
        self.shape, self.dtype = inputs.shape[1:], inputs.dtype
        reads = [i for i in range(len(inputs)) if i % batch_size in rows]
        if self.image:
            self.stored = {i: _jpeg(inputs[i]) for i in reads}
            self.augment = _augmentation(tuple(self.shape[1:]))
        else:
            self.stored = {i: inputs[i] for i in reads}

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        i = index % len(self.targets)
        if i not in self.stored:
            return torch.zeros(self.shape, dtype=self.dtype), self.targets[i]
        if self.image:
            from PIL import Image
            with torch.random.fork_rng(devices=[]):   # the sample's own draws, leaving the process's alone
                torch.manual_seed(self.seed * 1_000_003 + i)
                sample = self.augment(Image.open(io.BytesIO(self.stored[i])).convert("RGB"))
        else:
            sample = self.stored[i]
        spend_cpu(self.decode_cost_ms)
        return sample, self.targets[i]


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

    def __init__(self, config: ExperimentConfig, pool: list[tuple[torch.Tensor, torch.Tensor]], rows: range,
                 cores: list[int], pin_memory: bool):
        batch_size = len(pool[0][0])
        inputs = torch.cat([x for x, _ in pool])
        targets = torch.cat([y for _, y in pool])
        samples = SampleSet(inputs, targets, batch_size, rows, max(1, config.steps) * batch_size,
                            config.decode_cost_ms, config.seed)
        workers = config.loader_workers
        self.loader = DataLoader(samples, batch_size=batch_size, shuffle=False, drop_last=True,
                                 num_workers=workers, pin_memory=pin_memory,
                                 prefetch_factor=config.prefetch_factor if workers else None,
                                 persistent_workers=config.persistent_workers and workers > 0,
                                 worker_init_fn=OnCores(set(cores) or None, None) if workers else None)
        self._batches = iter(self.loader)   # workers start now and prefetch before the first step

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            return next(self._batches)
        except StopIteration:   # a run longer than its pass (steps counted from a later start): another pass
            self._batches = iter(self.loader)
            return next(self._batches)

    def close(self) -> None:
        """End the workers now (a pass left unfinished keeps them until the iterator goes)."""
        shutdown = getattr(self._batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self._batches = iter(())
