#!/usr/bin/env python3
"""Step 4a - train_cnn: data/features.npz -> models/cnn.pt (small PyTorch CNN).

Prints, Keras style, a line "Epoch k/N" (flushed) when each epoch starts,
then one metrics line when it ends:
    Epoch 3/12
    209/209 - 4.1s - loss: 0.0912 - accuracy: 0.9712 - val_loss: 0.0551 - val_accuracy: 0.9830
The validation split is 10% of the *training* source images (the test split
is only touched by evaluate.py).

The default --epochs is max(4, ceil(12 * DIGITS_SCALE)) (env var DIGITS_SCALE,
default 1.0).  The checkpoint holds no timings, so it is byte-identical
between runs with the same inputs and seed.  Uses one CPU thread by default
(--threads) so that it can run in parallel with train_baseline.py on two cores.
"""
import argparse
import math
import os
import sys
import time

sys.dont_write_bytecode = True  # keep the example directory free of __pycache__

import numpy as np
import torch
from torch import nn

from model import DigitsCNN

BASE_EPOCHS = 12
MIN_EPOCHS = 4


def digits_scale():
    raw = os.environ.get("DIGITS_SCALE", "1.0")
    try:
        scale = float(raw)
    except ValueError:
        sys.exit(f"train_cnn: error: DIGITS_SCALE={raw!r} is not a number")
    if not scale > 0:
        sys.exit(f"train_cnn: error: DIGITS_SCALE must be > 0, got {scale}")
    return scale


def evaluate(model, X, y, batch_size=1024):
    model.eval()
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(X), batch_size):
            out = model(X[i:i + batch_size])
            total_loss += loss_fn(out, y[i:i + batch_size]).item()
            correct += (out.argmax(1) == y[i:i + batch_size]).sum().item()
    return total_loss / len(X), correct / len(X)


def main():
    scale = digits_scale()
    default_epochs = max(MIN_EPOCHS, math.ceil(BASE_EPOCHS * scale))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default="data/features.npz", help="features archive (default: %(default)s)")
    p.add_argument("--out", default="models/cnn.pt", help="output checkpoint (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=None,
                   help=f"epochs (default: max({MIN_EPOCHS}, ceil({BASE_EPOCHS} * DIGITS_SCALE)) = {default_epochs})")
    p.add_argument("--batch-size", type=int, default=128, help="minibatch size (default: %(default)s)")
    p.add_argument("--lr", type=float, default=None,
                   help="Adam learning rate (default: train_cnn.lr of --params, else 0.002)")
    p.add_argument("--params", default="params.json",
                   help="parameters file (JSON, DVC style) whose train_cnn.lr is the default --lr, when it exists "
                        "(default: %(default)s)")
    p.add_argument("--channels", type=int, default=16, help="conv width (default: %(default)s)")
    p.add_argument("--val-frac", type=float, default=0.1,
                   help="fraction of training source images used for validation (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = p.parse_args()
    if args.lr is None:
        args.lr = 2e-3
        if os.path.exists(args.params):
            import json
            with open(args.params) as f:
                args.lr = float(json.load(f).get("train_cnn", {}).get("lr", args.lr))
    epochs = default_epochs if args.epochs is None else args.epochs
    if epochs < 1:
        p.error("--epochs must be >= 1")

    t0 = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if not os.path.exists(args.input):
        sys.exit(f"train_cnn: error: input {args.input} not found (run features.py first)")
    data = np.load(args.input)
    X, y, src = data["X_train"], data["y_train"], data["src_train"]

    rng = np.random.default_rng(args.seed)
    sources = np.unique(src)
    val_src = rng.choice(sources, size=max(1, int(round(args.val_frac * len(sources)))), replace=False)
    is_val = np.isin(src, val_src)
    X_tr, y_tr = torch.from_numpy(X[~is_val]), torch.from_numpy(y[~is_val])
    X_va, y_va = torch.from_numpy(X[is_val]), torch.from_numpy(y[is_val])

    config = {"channels": args.channels, "hidden": 128, "dropout": 0.25}
    model = DigitsCNN(**config)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    n_batches = math.ceil(len(X_tr) / args.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=epochs, steps_per_epoch=n_batches)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)
    print(f"train_cnn: {len(X_tr)} train / {len(X_va)} val rows, {epochs} epochs x {n_batches} batches, "
          f"{args.threads} thread(s)", flush=True)

    history = []
    for epoch in range(1, epochs + 1):
        print(f"Epoch {epoch}/{epochs}", flush=True)
        te = time.time()
        model.train()
        perm = torch.randperm(len(X_tr), generator=gen)
        run_loss, run_correct = 0.0, 0
        for b in range(n_batches):
            idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
            xb, yb = X_tr[idx], y_tr[idx]
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            opt.step()
            sched.step()
            run_loss += loss.item() * len(idx)
            run_correct += (out.argmax(1) == yb).sum().item()
        val_loss, val_acc = evaluate(model, X_va, y_va)
        h = {"epoch": epoch, "loss": run_loss / len(X_tr), "accuracy": run_correct / len(X_tr),
             "val_loss": val_loss, "val_accuracy": val_acc}
        history.append(h)
        print(f"{n_batches}/{n_batches} - {time.time() - te:.1f}s - loss: {h['loss']:.4f} - "
              f"accuracy: {h['accuracy']:.4f} - val_loss: {val_loss:.4f} - val_accuracy: {val_acc:.4f}",
              flush=True)

    d = os.path.dirname(args.out)
    if d:
        os.makedirs(d, exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "config": config, "epochs": epochs,
                "history": history, "seed": args.seed}, args.out)
    print(f"train_cnn: trained {epochs} epochs, val_accuracy {history[-1]['val_accuracy']:.4f}, "
          f"saved {args.out} in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
