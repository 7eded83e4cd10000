"""An example of a user's own model (``--model-file examples/tiny_transformer.py``): not a Sequential.

A small transformer encoder classifying token sequences: an embedding, residual
blocks kept in an ``nn.ModuleList`` and walked in a loop by ``forward``, a norm
and a head, the shape most real models have. Splitscope cuts it at any named
submodule (``--split layers.2``) with torch.distributed.pipelining's tracer, so
the model needs no rewriting as an ``nn.Sequential``.

The task is learnable: each sequence's class is which of a few fixed token
patterns it was drawn around.
"""
import torch
from torch import nn
from torch.nn import functional as F

VOCAB, LENGTH, WIDTH, HEADS, DEPTH, CLASSES = 256, 16, 64, 4, 4, 8


class Block(nn.Module):
    """Pre-norm self-attention, then a pre-norm MLP, each added back to its input."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Parameter(torch.zeros(LENGTH, WIDTH))
        self.layers = nn.ModuleList(Block(WIDTH, HEADS) for _ in range(DEPTH))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(dim=1))


def build_model() -> nn.Module:
    return TinyTransformer()


_PATTERNS = torch.randint(0, VOCAB, (CLASSES, LENGTH), generator=torch.Generator().manual_seed(7))


def make_batch(batch_size: int, generator: torch.Generator):
    """Each sequence is its class's pattern with a quarter of its tokens replaced at random."""
    labels = torch.randint(0, CLASSES, (batch_size,), generator=generator)
    tokens = _PATTERNS[labels].clone()
    noise = torch.rand(batch_size, LENGTH, generator=generator) < 0.25
    tokens[noise] = torch.randint(0, VOCAB, (int(noise.sum()),), generator=generator)
    return tokens, labels


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)
