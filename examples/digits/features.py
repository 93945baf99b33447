#!/usr/bin/env python3
"""Step 3 - features: data/clean.csv -> data/features.npz.

Splits by *source image* (all augmented copies of one original digit land on
the same side, so the test accuracy is not inflated by near-duplicates),
scales pixels to [0, 1] and standardises them with mean/std fitted on the
training split only.

features.npz holds: X_train, y_train, X_test, y_test (float32 (n, 64) /
int64), src_train, src_test (source_id of each row), mean, scale (the
standardiser, used by batch_infer.py on raw pixels) and columns.
"""
import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

PIXELS = [f"pixel_{r}_{c}" for r in range(8) for c in range(8)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default="data/clean.csv", help="clean CSV (default: %(default)s)")
    p.add_argument("--out", default="data/features.npz", help="output archive (default: %(default)s)")
    p.add_argument("--test-frac", type=float, default=0.2,
                   help="fraction of source images held out for testing (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = p.parse_args()
    if not 0 < args.test_frac < 1:
        p.error("--test-frac must be in (0, 1)")

    t0 = time.time()
    if not os.path.exists(args.input):
        sys.exit(f"features: error: input {args.input} not found (run validate.py first)")
    df = pd.read_csv(args.input)
    missing = [c for c in ["source_id", "label"] + PIXELS if c not in df.columns]
    if missing:
        sys.exit(f"features: error: {args.input} lacks columns {missing[:5]}")

    rng = np.random.default_rng(args.seed)
    sources = np.unique(df["source_id"].to_numpy())
    n_test_src = max(1, int(round(args.test_frac * len(sources))))
    test_src = rng.choice(sources, size=n_test_src, replace=False)
    is_test = df["source_id"].isin(test_src).to_numpy()
    if is_test.all() or not is_test.any():
        sys.exit("features: error: degenerate split (too few source images)")

    X = df[PIXELS].to_numpy(dtype=np.float32) / 16.0
    y = df["label"].to_numpy(dtype=np.int64)
    src = df["source_id"].to_numpy(dtype=np.int64)
    X_train, X_test = X[~is_test], X[is_test]
    mean = X_train.mean(axis=0)
    scale = X_train.std(axis=0)
    scale[scale < 1e-6] = 1.0  # constant (always-blank) pixels
    X_train = (X_train - mean) / scale
    X_test = (X_test - mean) / scale

    d = os.path.dirname(args.out)
    if d:
        os.makedirs(d, exist_ok=True)
    np.savez_compressed(
        args.out,
        X_train=X_train.astype(np.float32), y_train=y[~is_test],
        X_test=X_test.astype(np.float32), y_test=y[is_test],
        src_train=src[~is_test], src_test=src[is_test],
        mean=mean.astype(np.float32), scale=scale.astype(np.float32),
        columns=np.array(PIXELS),
    )
    print(f"features: {len(X_train)} train / {len(X_test)} test rows "
          f"({len(sources) - n_test_src} / {n_test_src} source images), 64 standardised features "
          f"to {args.out} in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
