#!/usr/bin/env python3
"""Step 1 - acquire: scikit-learn's bundled digits (no download) -> data/raw.csv.

Each of the 1797 original 8x8 images is written once, plus --copies augmented
copies (with probability 0.5 a random shift by up to 1
pixel, plus sparse +-1 pixel noise) so that the later steps
have real work to do.  A tiny, deterministic fraction of rows is deliberately
corrupted (NaN / out-of-range pixel / bad label) and a few exact duplicates are
added, so that validate.py has something to catch.

Columns: source_id (index of the original image), pixel_0_0 .. pixel_7_7
(integers 0..16), label (0..9).

The default --copies is 20 * DIGITS_SCALE (env var, default 1.0).
"""
import argparse
import os
import sys
import time

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits

BASE_COPIES = 20


def digits_scale():
    raw = os.environ.get("DIGITS_SCALE", "1.0")
    try:
        scale = float(raw)
    except ValueError:
        sys.exit(f"acquire: error: DIGITS_SCALE={raw!r} is not a number")
    if not scale > 0:
        sys.exit(f"acquire: error: DIGITS_SCALE must be > 0, got {scale}")
    return scale


def shift(img, dy, dx):
    """Shift a (n, 8, 8) batch by (dy, dx) pixels, filling with zeros."""
    out = np.zeros_like(img)
    h, w = img.shape[1:]
    ys, yd = (slice(0, h - dy), slice(dy, h)) if dy >= 0 else (slice(-dy, h), slice(0, h + dy))
    xs, xd = (slice(0, w - dx), slice(dx, w)) if dx >= 0 else (slice(-dx, w), slice(0, w + dx))
    out[:, yd, xd] = img[:, ys, xs]
    return out


def main():
    scale = digits_scale()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="data/raw.csv", help="output CSV (default: %(default)s)")
    p.add_argument("--copies", type=int, default=None,
                   help=f"augmented copies per image (default: round({BASE_COPIES} * DIGITS_SCALE) "
                        f"= {round(BASE_COPIES * scale)})")
    p.add_argument("--shift-prob", type=float, default=0.5,
                   help="probability that a copy is shifted by up to 1 pixel (default: %(default)s)")
    p.add_argument("--noise", type=float, default=0.08,
                   help="fraction of pixels that get +-1 noise in a copy (default: %(default)s)")
    p.add_argument("--corrupt-frac", type=float, default=0.002,
                   help="fraction of rows deliberately corrupted for validate.py (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = p.parse_args()
    copies = round(BASE_COPIES * scale) if args.copies is None else args.copies
    if copies < 0:
        p.error("--copies must be >= 0")

    t0 = time.time()
    rng = np.random.default_rng(args.seed)
    digits = load_digits()
    images = digits.images.astype(np.int16)  # (1797, 8, 8), values 0..16
    labels = digits.target.astype(np.int16)
    n = len(labels)
    ids = np.arange(n)

    parts_x, parts_y, parts_id = [images.reshape(n, 64)], [labels], [ids]
    for _ in range(copies):
        aug = np.empty_like(images)
        d = rng.integers(-1, 2, size=(n, 2))
        d[rng.random(n) >= args.shift_prob] = 0  # the rest: noise only
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                m = (d[:, 0] == dy) & (d[:, 1] == dx)
                if m.any():
                    aug[m] = shift(images[m], dy, dx)
        noise_mask = rng.random(aug.shape) < args.noise
        aug = aug + noise_mask * rng.choice(np.array([-1, 1], dtype=np.int16), size=aug.shape)
        aug = np.clip(aug, 0, 16)
        parts_x.append(aug.reshape(n, 64))
        parts_y.append(labels)
        parts_id.append(ids)

    X = np.concatenate(parts_x)
    y = np.concatenate(parts_y)
    sid = np.concatenate(parts_id)
    cols = [f"pixel_{r}_{c}" for r in range(8) for c in range(8)]
    df = pd.DataFrame(X, columns=cols).astype("Int64")
    df.insert(0, "source_id", sid)
    df["label"] = pd.array(y, dtype="Int64")

    # Deliberate defects for the validation step (deterministic).
    n_bad = int(round(args.corrupt_frac * len(df)))
    if n_bad:
        bad = rng.choice(len(df), size=n_bad, replace=False)
        kinds = np.arange(n_bad) % 3
        pix_col = rng.integers(0, 64, size=n_bad)
        for row, kind, pc in zip(bad, kinds, pix_col):
            if kind == 0:
                df.iat[row, 1 + pc] = pd.NA          # missing pixel
            elif kind == 1:
                df.iat[row, 1 + pc] = 99             # out-of-range pixel
            else:
                df.iat[row, df.columns.get_loc("label")] = 12  # invalid label
        dups = df.iloc[rng.choice(len(df), size=max(1, n_bad // 2), replace=False)]
        df = pd.concat([df, dups], ignore_index=True)

    df = df.sample(frac=1.0, random_state=args.seed).reset_index(drop=True)
    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(f"acquire: wrote {len(df)} rows ({n} originals x {copies + 1}, "
          f"{n_bad} corrupted, {len(df) - n * (copies + 1)} duplicates) to {args.out} "
          f"in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
