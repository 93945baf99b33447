#!/usr/bin/env python3
"""Step 6 - batch_infer: models/cnn.pt + data/features.npz + data/clean.csv -> data/predictions.csv.

Runs the CNN over every row of data/clean.csv in batches of --batch-size,
standardising the raw pixels with the mean/scale stored in features.npz.
predictions.csv columns: row, source_id, label, pred, confidence, split
("train"/"test", by source image, as in features.py).
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True  # keep the example directory free of __pycache__

import numpy as np
import pandas as pd
import torch

from model import load_checkpoint

PIXELS = [f"pixel_{r}_{c}" for r in range(8) for c in range(8)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default="data/clean.csv", help="rows to score (default: %(default)s)")
    p.add_argument("--features", default="data/features.npz",
                   help="archive with the standardiser (default: %(default)s)")
    p.add_argument("--cnn", default="models/cnn.pt", help="CNN checkpoint (default: %(default)s)")
    p.add_argument("--out", default="data/predictions.csv", help="output CSV (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=256, help="inference batch size (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    args = p.parse_args()
    if args.batch_size < 1:
        p.error("--batch-size must be >= 1")

    t0 = time.time()
    for path in (args.input, args.features, args.cnn):
        if not os.path.exists(path):
            sys.exit(f"batch_infer: error: input {path} not found")
    torch.set_num_threads(args.threads)
    df = pd.read_csv(args.input)
    missing = [c for c in ["source_id", "label"] + PIXELS if c not in df.columns]
    if missing:
        sys.exit(f"batch_infer: error: {args.input} lacks columns {missing[:5]}")
    feats = np.load(args.features)
    X = ((df[PIXELS].to_numpy(dtype=np.float32) / 16.0 - feats["mean"]) / feats["scale"]).astype(np.float32)
    test_src = np.unique(feats["src_test"])

    model, _ = load_checkpoint(args.cnn)
    preds, confs = [], []
    n_batches = 0
    with torch.no_grad():
        Xt = torch.from_numpy(X)
        for i in range(0, len(Xt), args.batch_size):
            prob = torch.softmax(model(Xt[i:i + args.batch_size]), dim=1)
            conf, pred = prob.max(dim=1)
            preds.append(pred.numpy())
            confs.append(conf.numpy())
            n_batches += 1
    pred = np.concatenate(preds)
    conf = np.concatenate(confs)

    out = pd.DataFrame({
        "row": np.arange(len(df)),
        "source_id": df["source_id"].to_numpy(),
        "label": df["label"].to_numpy(),
        "pred": pred,
        "confidence": np.round(conf, 5),
        "split": np.where(df["source_id"].isin(test_src), "test", "train"),
    })
    d = os.path.dirname(args.out)
    if d:
        os.makedirs(d, exist_ok=True)
    out.to_csv(args.out, index=False)
    acc = float((out["pred"] == out["label"]).mean())
    print(f"batch_infer: scored {len(out)} rows in {n_batches} batches of {args.batch_size} "
          f"(accuracy on all rows {acc:.4f}) -> {args.out} in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
