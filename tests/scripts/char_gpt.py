"""
Style: nanoGPT's train.py (config globals overridden by `--key=value`, RANK-detected DDP,
configure_optimizers with weight-decay groups, gradient accumulation, estimate_loss()
under @torch.no_grad(), cosine lr). Own code: tiny char-level GPT, synthetic corpus.

Tests: micro-steps (loss scaled by gradient_accumulation_steps) with exactly `max_iters`
optimizer steps, interleaved with eval passes (model.eval(), no_grad) every
`eval_interval` iters; DDP with default backend 'nccl' (on CPU under torchrun pass
`--backend=gloo --device=cpu`). Prints `iter N: loss X` per step and `final loss X`
(master process only).
"""
import math
import os
import sys
from ast import literal_eval

import torch
import torch.nn as nn
from torch.distributed import destroy_process_group, init_process_group
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# -----------------------------------------------------------------------------
# default config values: tiny, so a CPU run takes a second or two
eval_interval, eval_iters = 3, 2
gradient_accumulation_steps, batch_size, block_size = 2, 4, 16
n_layer, n_head, n_embd, dropout = 2, 2, 32, 0.0
learning_rate, max_iters, weight_decay = 1e-3, 6, 1e-1
beta1, beta2, grad_clip = 0.9, 0.95, 1.0
decay_lr, warmup_iters, lr_decay_iters, min_lr = True, 2, 6, 1e-4
backend, device = 'nccl', 'cpu'  # under torchrun on CPU: --backend=gloo --device=cpu
# poor man's configurator: --key=value overrides the globals above
for arg in sys.argv[1:]:
    assert arg.startswith('--') and '=' in arg, f"expected --key=value, got {arg}"
    key, val = arg[2:].split('=', 1)
    assert key in globals(), f"unknown config key: {key}"
    try:
        val = literal_eval(val)
    except (SyntaxError, ValueError):
        pass  # plain string, e.g. --backend=gloo
    print(f"Overriding: {key} = {val}")
    globals()[key] = val
# -----------------------------------------------------------------------------

ddp = int(os.environ.get('RANK', -1)) != -1  # is this a ddp run?
if ddp:
    init_process_group(backend=backend)
    ddp_rank, ddp_local_rank = int(os.environ['RANK']), int(os.environ['LOCAL_RANK'])
    ddp_world_size = int(os.environ['WORLD_SIZE'])
    if backend == 'nccl' or device.startswith('cuda'):
        device = f'cuda:{ddp_local_rank}'
        torch.cuda.set_device(device)
    master_process, seed_offset = ddp_rank == 0, ddp_rank
    assert gradient_accumulation_steps % ddp_world_size == 0
    gradient_accumulation_steps //= ddp_world_size
else:
    master_process, seed_offset, ddp_world_size = True, 0, 1
torch.manual_seed(1337 + seed_offset)
device_type = 'cuda' if 'cuda' in device else 'cpu'

# synthetic character corpus, encoded once into a tensor
text = ''.join(f"the {w} sat on the mat number {i % 7}.\n" for i, w in
               enumerate(['cat', 'dog', 'owl', 'fox', 'bee'] * 60))
stoi = {ch: i for i, ch in enumerate(sorted(set(text)))}
vocab_size = len(stoi)
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
train_data, val_data = data[:int(0.9 * len(data))], data[int(0.9 * len(data)):]

def get_batch(split):
    d = train_data if split == 'train' else val_data
    ix = torch.randint(len(d) - block_size, (batch_size,))
    x, y = (torch.stack([d[i + o:i + o + block_size] for i in ix]) for o in (0, 1))
    return x.to(device), y.to(device)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout if self.training else 0)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln_2(x))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{'params': [p for p in params if p.dim() >= 2], 'weight_decay': weight_decay},  # matmuls
                  {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0}]  # biases, norms
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

model = GPT().to(device)
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2))
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None)

@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            _, loss = model(*get_batch(split))
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out

def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / max(1, lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)

X, Y = get_batch('train')
iter_num = 0
while True:
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups: param_group['lr'] = lr
    if iter_num % eval_interval == 0 and master_process:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    for micro_step in range(gradient_accumulation_steps):
        if ddp:  # only sync gradients on the last micro step
            model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps  # scale the loss to account for accumulation
        X, Y = get_batch('train')  # prefetch the next batch
        loss.backward()
    if grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    lossf = loss.item() * gradient_accumulation_steps
    if master_process:
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}")
    iter_num += 1
    if iter_num >= max_iters:
        break

if master_process:
    print(f"final loss {lossf:.4f}")
if ddp:
    destroy_process_group()
