"""Model files that misbehave at a chosen step, for the fault-injection tests.

Each is written to a temporary file by ``write(kind, tmp_path, at_step)``; the
step is counted by forward calls of the first block.
"""
from __future__ import annotations

from pathlib import Path

TEMPLATE = '''
import time
import torch
from torch import nn

AT_STEP = {at_step}

class Faulty(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > AT_STEP:
            {action}
        return torch.relu(self.fc(x))

def build_model():
    return nn.Sequential(Faulty(), nn.Linear(16, 16), nn.Linear(16, 4))

def make_batch(batch_size, generator):
    return torch.randn(batch_size, 16, generator=generator), torch.randint(0, 4, (batch_size,), generator=generator)
'''

ACTIONS = {
    "raise": "raise ValueError('user model broke at step %d' % self.calls)",
    "oom": "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB')",
    "hang": "time.sleep(3600)",
}


def write(kind: str, folder: Path, at_step: int) -> Path:
    path = folder / f"faulty_{kind}.py"
    path.write_text(TEMPLATE.format(at_step=at_step, action=ACTIONS[kind]))
    return path
