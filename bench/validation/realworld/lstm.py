#!/usr/bin/python3
"""An LSTM language model trained without a DataLoader (the shape of PyTorch's
word_language_model example): a synthetic token stream is cut into (bptt x batch) slices by
hand, the hidden state is carried over (detached) between slices, and after each epoch the
validation stream is scored under model.eval() + torch.no_grad(). It prints
`| end of epoch N | ...` after each epoch, as that example does, for a log rule to find.

Ground truth (truth.py): getrusage, peak PSS, and counts: train_epochs, train_iterations
(one optimizer step per slice), eval_iterations (one forward per validation slice).

    lstm.py [--epochs 3] [--tokens 8000] [--threads N]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--tokens", type=int, default=8000)
ap.add_argument("--vocab", type=int, default=200)
ap.add_argument("--bptt", type=int, default=35)
ap.add_argument("--batch", type=int, default=20)
ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
args = ap.parse_args()

truth.start("lstm")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.manual_seed(0)
if args.threads:
    torch.set_num_threads(args.threads)


def stream(n, seed):
    """A token stream with structure to learn: a noisy walk through the vocabulary."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.randint(-3, 4, (n,), generator=g)
    return torch.cumsum(steps, 0).remainder(args.vocab)


def batchify(data, bsz):
    n = data.size(0) // bsz
    return data[:n * bsz].view(bsz, n).t().contiguous()


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=32, nhid=64, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden


def detach(h):
    return tuple(v.detach() for v in h)


train = batchify(stream(args.tokens, 1), args.batch)
val = batchify(stream(args.tokens // 4, 2), 10)
model = RNNModel(args.vocab)
crit = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=1.0)

for epoch in range(1, args.epochs + 1):
    t0 = time.time()
    model.train()
    hidden = None
    for i in range(0, train.size(0) - 1, args.bptt):
        n = min(args.bptt, train.size(0) - 1 - i)
        x, y = train[i:i + n], train[i + 1:i + 1 + n]
        hidden = detach(hidden) if hidden is not None else None
        opt.zero_grad()
        out, hidden = model(x, hidden)
        loss = crit(out.view(-1, args.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        truth.count("train_iterations")
    truth.count("train_epochs")
    model.eval()
    total, hidden = 0.0, None
    with torch.no_grad():
        for i in range(0, val.size(0) - 1, args.bptt):
            n = min(args.bptt, val.size(0) - 1 - i)
            out, hidden = model(val[i:i + n], hidden)
            total += n * crit(out.view(-1, args.vocab), val[i + 1:i + 1 + n].reshape(-1)).item()
            truth.count("eval_iterations")
    print("-" * 60)
    print(f"| end of epoch {epoch:3d} | time: {time.time() - t0:5.2f}s | valid loss {total / (val.size(0) - 1):5.2f}",
          flush=True)
    print("-" * 60, flush=True)
truth.finish()
