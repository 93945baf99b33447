#!/usr/bin/env python3
"""Step 5 - evaluate: models/cnn.pt + models/baseline.pkl + data/features.npz -> metrics.json.

Computes the accuracy (and per-class accuracy / CNN log-loss) of both models on
the held-out test split and writes them to metrics.json (in the pipeline
directory, not under data/).
"""
import argparse
import json
import os
import pickle
import sys
import time

sys.dont_write_bytecode = True  # keep the example directory free of __pycache__

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from model import load_checkpoint


def per_class(y, pred):
    return {str(c): round(float((pred[y == c] == c).mean()), 4) for c in np.unique(y)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", default="data/features.npz", help="features archive (default: %(default)s)")
    p.add_argument("--cnn", default="models/cnn.pt", help="CNN checkpoint (default: %(default)s)")
    p.add_argument("--baseline", default="models/baseline.pkl", help="baseline pickle (default: %(default)s)")
    p.add_argument("--out", default="metrics.json", help="metrics file (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=1024, help="CNN inference batch (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch/BLAS CPU threads (default: %(default)s)")
    args = p.parse_args()

    t0 = time.time()
    for path in (args.features, args.cnn, args.baseline):
        if not os.path.exists(path):
            sys.exit(f"evaluate: error: input {path} not found")
    torch.set_num_threads(args.threads)
    data = np.load(args.features)
    X, y = data["X_test"], data["y_test"]

    model, ckpt = load_checkpoint(args.cnn)
    logits = []
    with torch.no_grad():
        Xt = torch.from_numpy(X)
        for i in range(0, len(Xt), args.batch_size):
            logits.append(model(Xt[i:i + args.batch_size]))
    logits = torch.cat(logits)
    cnn_loss = float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)))
    cnn_pred = logits.argmax(1).numpy()
    cnn_acc = float((cnn_pred == y).mean())

    with open(args.baseline, "rb") as f:
        base = pickle.load(f)
    with threadpool_limits(limits=args.threads):
        base_pred = base["model"].predict(X)
    base_acc = float((base_pred == y).mean())

    metrics = {
        "n_test": int(len(y)),
        "cnn": {"accuracy": round(cnn_acc, 4), "log_loss": round(cnn_loss, 4),
                "epochs": int(ckpt["epochs"]), "per_class_accuracy": per_class(y, cnn_pred)},
        "baseline": {"accuracy": round(base_acc, 4), "model": base["kind"],
                     "per_class_accuracy": per_class(y, base_pred)},
        "agreement": round(float((cnn_pred == base_pred).mean()), 4),
    }
    d = os.path.dirname(args.out)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(metrics, f, indent=2)
        f.write("\n")
    print(f"evaluate: test accuracy cnn {cnn_acc:.4f}, baseline ({base['kind']}) {base_acc:.4f} "
          f"on {len(y)} rows -> {args.out} in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
