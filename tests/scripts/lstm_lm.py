"""
Style: pytorch/examples word_language_model/main.py (RNNModel with encoder Embedding,
nn.LSTM/nn.GRU and decoder Linear; `batchify` into sequence-first columns; truncated
BPTT with `repackage_hidden`; manual SGD update, no torch.optim). Own code, synthetic
token stream made in the script.

Tests: a training step that has NO optimizer (parameters updated with
`p.data.add_(p.grad, alpha=-lr)` after clip_grad_norm_, then model.zero_grad()),
sequence-first [seq_len, batch] inputs, a hidden state carried across steps, and an
evaluate() pass (model.eval() + torch.no_grad()) over a validation split after every
epoch. Prints `training batches N` (total over all epochs) and `final loss X`.
"""
import argparse
import math
import time

import torch
import torch.nn as nn

parser = argparse.ArgumentParser(description='Tiny RNN/LSTM language model (synthetic corpus)')
parser.add_argument('--model', type=str, default='LSTM', help='type of recurrent net (LSTM, GRU)')
parser.add_argument('--ntokens', type=int, default=40, help='vocabulary size')
parser.add_argument('--train-tokens', type=int, default=164, help='length of the training stream')
parser.add_argument('--emsize', type=int, default=16, help='size of word embeddings')
parser.add_argument('--nhid', type=int, default=16, help='number of hidden units per layer')
parser.add_argument('--nlayers', type=int, default=2, help='number of layers')
parser.add_argument('--lr', type=float, default=20, help='initial learning rate')
parser.add_argument('--clip', type=float, default=0.25, help='gradient clipping')
parser.add_argument('--epochs', type=int, default=2, help='upper epoch limit')
parser.add_argument('--batch_size', type=int, default=4, metavar='N', help='batch size')
parser.add_argument('--bptt', type=int, default=8, help='sequence length')
parser.add_argument('--dropout', type=float, default=0.2, help='dropout applied to layers')
parser.add_argument('--seed', type=int, default=1111, help='random seed')
parser.add_argument('--log-interval', type=int, default=2, metavar='N', help='report interval')
parser.add_argument('--cuda', action='store_true', help='use CUDA')
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device('cuda' if args.cuda else 'cpu')

###############################################################################
# Synthetic corpus: a noisy cyclic walk over the vocabulary, so it is learnable
###############################################################################
def make_stream(length):
    steps = torch.randint(1, 3, (length,))
    return torch.cumsum(steps, 0) % args.ntokens

def batchify(data, bsz):
    # Trim off the remainder and lay the stream out as bsz columns: [nbatch, bsz].
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)

eval_batch_size = 2
train_data = batchify(make_stream(args.train_tokens), args.batch_size)
val_data = batchify(make_stream(args.train_tokens // 4), eval_batch_size)

###############################################################################
# Model
###############################################################################
class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.decoder.out_features)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)

model = RNNModel(args.model, args.ntokens, args.emsize, args.nhid, args.nlayers, args.dropout).to(device)
criterion = nn.NLLLoss()

###############################################################################
# Training code
###############################################################################
def repackage_hidden(h):
    """Detach hidden states from their history so BPTT stops at the batch edge."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)

def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target

def evaluate(data_source):
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)

batches_run = 0
last_loss = float('nan')

def train(epoch):
    global batches_run, last_loss
    model.train()
    start_time = time.time()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        # clip_grad_norm_ helps prevent the exploding gradient problem in RNNs
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        batches_run += 1
        last_loss = loss.item()
        if batch % args.log_interval == 0:
            ms = (time.time() - start_time) * 1000 / (batch + 1)
            print(f'| epoch {epoch:3d} | batch {batch:3d} | lr {lr:5.2f} | ms/batch {ms:6.2f} '
                  f'| loss {last_loss:5.2f} | ppl {math.exp(last_loss):8.2f}')

lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs + 1):
    epoch_start_time = time.time()
    train(epoch)
    val_loss = evaluate(val_data)
    print(f'| end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s '
          f'| valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}')
    if best_val_loss is None or val_loss < best_val_loss:
        best_val_loss = val_loss
    else:
        lr /= 4.0  # anneal the learning rate if no improvement on validation

print(f'training batches {batches_run}')
print(f'final loss {last_loss:.4f}')
