"""
Style: the "save/load the entire model" recipe from the PyTorch tutorials
(`torch.save(model, PATH)` then `torch.load(PATH)`), updated for torch >= 2.6 where
torch.load defaults to weights_only=True: the script allow-lists its own classes and the
torch.nn classes it uses with torch.serialization.add_safe_globals. Own code.

Tests: pickling of the WHOLE nn.Module (classes defined in this script's __main__) after a
few Adam steps, a weights_only=True reload whose output must equal the original's, and a
weights_only=True round trip of optimizer.state_dict(). Files go to a temporary folder
that is removed at the end. Prints `reloaded ok` and `final loss X`; exits non-zero if
the reload does not match.
"""
import argparse
import os
import sys
import tempfile

import torch
import torch.nn as nn

parser = argparse.ArgumentParser(description='Train briefly, then save and reload the whole model')
parser.add_argument('--steps', type=int, default=5)
parser.add_argument('--batch-size', type=int, default=16)
parser.add_argument('--lr', type=float, default=1e-2)
args = parser.parse_args()


class Residual(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, dim * 2), nn.ReLU(), nn.Linear(dim * 2, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class TinyRegressor(nn.Module):
    def __init__(self, dim_in=8, dim=16):
        super().__init__()
        self.stem = nn.Linear(dim_in, dim)
        self.blocks = nn.ModuleList([Residual(dim), Residual(dim)])
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


torch.manual_seed(0)
model = TinyRegressor()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
loss_fn = nn.MSELoss()
w_true = torch.randn(8, 1)
for step in range(args.steps):
    x = torch.randn(args.batch_size, 8)
    y = x @ w_true
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    print(f'step {step}: loss {loss.item():.4f}')

model.eval()
probe = torch.randn(4, 8)
with torch.no_grad():
    expected = model(probe)

with tempfile.TemporaryDirectory(prefix='save_whole_model_') as tmp:
    model_path = os.path.join(tmp, 'model.pt')
    optim_path = os.path.join(tmp, 'optimizer.pt')
    torch.save(model, model_path)                  # the whole module, pickled by class
    torch.save(optimizer.state_dict(), optim_path)

    torch.serialization.add_safe_globals([
        TinyRegressor, Residual,
        nn.Linear, nn.LayerNorm, nn.ReLU, nn.Sequential, nn.ModuleList,
    ])
    reloaded = torch.load(model_path, weights_only=True)
    optim_state = torch.load(optim_path, weights_only=True)

reloaded.eval()
with torch.no_grad():
    got = reloaded(probe)
if not torch.equal(got, expected):
    print(f'reload mismatch: max abs diff {(got - expected).abs().max().item()}')
    sys.exit(1)
fresh = torch.optim.Adam(reloaded.parameters(), lr=args.lr)
fresh.load_state_dict(optim_state)
assert fresh.state_dict()['state'][0]['step'] == args.steps, 'optimizer step count lost in reload'
print('reloaded ok')
print(f'final loss {loss.item():.4f}')
