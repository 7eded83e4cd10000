"""
Style: the Hugging Face "training loop in native PyTorch" tutorial (Dataset of dicts,
DataLoader with a collate that returns a dict of tensors, `batch = {k: v.to(device) ...}`,
`outputs = model(**batch)`, `loss = outputs.loss`, AdamW + a linear lr schedule,
optimizer.step(); lr_scheduler.step(); optimizer.zero_grad()) -- without `transformers`:
a tiny SequenceClassifier whose forward takes keyword args and returns an output object.
Own code.

Tests: a model called with keyword arguments only (`model(**batch)`, no positional
input), whose output is a dataclass with `.loss` / `.logits` rather than a tensor, and
optimizer steps that happen every `--gradient_accumulation_steps` batches (plus the last
batch of each epoch). Prints `optimizer steps N` and `final loss X`.
"""
import argparse
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description='HF-tutorial-style loop, no transformers')
parser.add_argument('--num_samples', type=int, default=48, help='training examples (48 -> 6 batches of 8)')
parser.add_argument('--batch_size', type=int, default=8)
parser.add_argument('--num_epochs', type=int, default=2)
parser.add_argument('--gradient_accumulation_steps', type=int, default=1)
parser.add_argument('--learning_rate', type=float, default=5e-3)
parser.add_argument('--vocab_size', type=int, default=50)
parser.add_argument('--max_len', type=int, default=12)
parser.add_argument('--seed', type=int, default=42)
args = parser.parse_args()
torch.manual_seed(args.seed)


class ToySentimentDataset(Dataset):
    """Variable-length token sequences; label 1 when token 1 ("good") outnumbers token 2 ("bad")."""

    def __init__(self, n, vocab_size, max_len):
        self.examples = []
        for _ in range(n):
            length = int(torch.randint(4, max_len + 1, ()))
            ids = torch.randint(1, vocab_size, (length,))
            label = int((ids == 1).sum() >= (ids == 2).sum())
            self.examples.append({'input_ids': ids, 'labels': label})

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        return self.examples[idx]


def collate_fn(features):
    """Pad to the longest sequence in the batch, like DataCollatorWithPadding."""
    max_len = max(len(f['input_ids']) for f in features)
    input_ids = torch.zeros(len(features), max_len, dtype=torch.long)
    attention_mask = torch.zeros(len(features), max_len, dtype=torch.long)
    for i, f in enumerate(features):
        input_ids[i, :len(f['input_ids'])] = f['input_ids']
        attention_mask[i, :len(f['input_ids'])] = 1
    labels = torch.tensor([f['labels'] for f in features])
    return {'input_ids': input_ids, 'attention_mask': attention_mask, 'labels': labels}


@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None


class SequenceClassifier(nn.Module):
    def __init__(self, vocab_size, hidden=32, num_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden, padding_idx=0)
        self.encoder = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids=None, attention_mask=None, labels=None):
        hidden = self.encoder(self.embeddings(input_ids))
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # masked mean pooling
        logits = self.classifier(pooled)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


train_dataset = ToySentimentDataset(args.num_samples, args.vocab_size, args.max_len)
eval_dataset = ToySentimentDataset(16, args.vocab_size, args.max_len)
train_dataloader = DataLoader(train_dataset, shuffle=True, batch_size=args.batch_size, collate_fn=collate_fn)
eval_dataloader = DataLoader(eval_dataset, batch_size=args.batch_size, collate_fn=collate_fn)

device = torch.device('cuda') if torch.cuda.is_available() else torch.device('cpu')
model = SequenceClassifier(args.vocab_size).to(device)
optimizer = AdamW(model.parameters(), lr=args.learning_rate)

updates_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
num_training_steps = args.num_epochs * updates_per_epoch
num_warmup_steps = 0
def lr_lambda(current_step):  # linear warmup then linear decay, like get_scheduler("linear")
    if current_step < num_warmup_steps:
        return current_step / max(1, num_warmup_steps)
    return max(0.0, (num_training_steps - current_step) / max(1, num_training_steps - num_warmup_steps))
lr_scheduler = LambdaLR(optimizer, lr_lambda)

completed_steps = 0
model.train()
for epoch in range(args.num_epochs):
    for step, batch in enumerate(train_dataloader):
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model(**batch)
        loss = outputs.loss / args.gradient_accumulation_steps
        loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            completed_steps += 1
            train_loss = outputs.loss.item()
            print(f"epoch {epoch} step {completed_steps}: loss {train_loss:.4f}")

model.eval()
correct = 0
for batch in eval_dataloader:
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.no_grad():
        eval_outputs = model(**batch)
    correct += (eval_outputs.logits.argmax(dim=-1) == batch['labels']).sum().item()
print(f"eval accuracy {correct / len(eval_dataset):.3f}")
print(f"optimizer steps {completed_steps}")
print(f"final loss {train_loss:.4f}")
